"""Model Explorer's node data: a layer comparison of the user's artefact against its
source written as one ``GraphNodeData``, checked against the schema ``model_explorer`` documents
in ``node_data_builder.py`` (its dataclasses ``GraphNodeData``, ``NodeDataResult`` and
``GradientItem``), and, where the package is installed, read strictly into those very
dataclasses."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.layer_stats import LayerComparison, compare_layer
from segdiff_gui.io.artefacts import artefact_graph
from segdiff_gui.io.model_explorer import write_node_data
from segdiff_gui.resources import demo_model
from tests.conftest import segdiff_here
from tests.factories import assert_node_data
from tests.hostile.artefact_files import onnx_bytes, tflite_bytes


def _comparison() -> LayerComparison:
    rng = np.random.default_rng(5)
    source = rng.random((4, 4, 2), dtype=np.float32)
    conv = replace(compare_layer("conv", source, source + 0.01), node="1")
    same = replace(compare_layer("pool", source, source.copy()), node="3")
    zero = np.zeros((4, 4, 2), np.float32)
    nothing = replace(compare_layer("relu", zero, zero + 1), node="4")  # no ratio to a zero
    keras = compare_layer("dropout", source, source + 0.02)  # no node of the artefact's
    return LayerComparison((conv, same, nothing, keras))


def test_each_layer_s_relative_error_is_on_its_node_as_the_schema_has_it(tmp_path):
    comparison = _comparison()
    path = tmp_path / "errors.json"
    assert write_node_data(path, comparison) == 2
    data = json.loads(path.read_text(encoding="utf-8"))
    assert_node_data(data)
    conv, pool = comparison.layers[:2]
    assert data["results"] == {
        "1": {"value": conv.relative_error},
        "3": {"value": pool.relative_error},
    }
    assert pool.relative_error == 0 and conv.relative_error > 0


def test_what_cannot_be_node_data_is_one_line_naming_the_file(tmp_path):
    keras_only = LayerComparison((compare_layer("conv", np.ones(3), np.ones(3) * 2),))
    with pytest.raises(InputError, match="no layer on a node of an artefact's graph"):
        write_node_data(tmp_path / "errors.json", keras_only)
    assert not (tmp_path / "errors.json").exists()
    with pytest.raises(InputError, match="is a folder"):
        write_node_data(tmp_path, _comparison())
    with pytest.raises(InputError, match="no such folder"):
        write_node_data(tmp_path / "nowhere" / "errors.json", _comparison())


def test_model_explorer_flags_are_refused_before_any_probe(tmp_path, capsys, monkeypatch):
    artefact = tmp_path / "model.tflite"
    artefact.write_bytes(tflite_bytes())
    image = tmp_path / "cell.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))
    cache = ("--cache", tmp_path / "cache")
    alone = segdiff_here(capsys, "layers", demo_model(), image, "--from", "batch=1", "--to",
                         "batch=2", "--model-explorer", tmp_path / "e.json", *cache)  # fmt: skip
    assert alone.returncode == 2
    (line,) = alone.stderr.strip().splitlines()
    assert "--model-explorer: is for your own artefact beside its --source" in line
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # the extra is not installed
    shown = segdiff_here(capsys, "layers", artefact, image, "--source", demo_model(), "--show",
                         *cache)  # fmt: skip
    assert shown.returncode == 2
    (line,) = shown.stderr.strip().splitlines()
    assert "--show: needs Google Model Explorer, segdiff's explorer extra" in line
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.h5"))


def test_an_unnamed_onnx_node_is_named_as_model_explorer_s_onnx_adapter_names_it(tmp_path):
    # model-explorer-onnx names a node without a name <node_{i}>, i its index among all the
    # graph's nodes (a Constant counts); a named node keeps its name.
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [None, 8, 8, 1])
    out = helper.make_tensor_value_info("map", TensorProto.FLOAT, [None, 8, 8, 1])
    nodes = [
        helper.make_node("Constant", [], ["c"], value_float=0.0),
        helper.make_node("Sigmoid", ["image"], ["raw"]),
        helper.make_node("Add", ["raw", "c"], ["map"], name="bias"),
    ]
    graph = helper.make_graph(nodes, "tiny", [image], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    found = artefact_graph(path, path.read_bytes())
    assert [op.node for op in found.ops] == ["<node_1>", "bias"]


def test_show_on_an_onnx_without_model_explorer_s_onnx_adapter_is_one_line(
    tmp_path, capsys, monkeypatch
):
    # The explorer extra installs Model Explorer, not its ONNX adapter: refused before any
    # probe, saying what to install.
    installed = tmp_path / "site"
    (installed / "model_explorer").mkdir(parents=True)
    (installed / "model_explorer" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.setitem(sys.modules, "model_explorer_onnx", None)  # the adapter is not
    artefact = tmp_path / "model.onnx"
    artefact.write_bytes(onnx_bytes())
    image = tmp_path / "cell.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))
    shown = segdiff_here(capsys, "layers", artefact, image, "--source", demo_model(), "--show",
                         "--cache", tmp_path / "cache")  # fmt: skip
    assert shown.returncode == 2
    (line,) = shown.stderr.strip().splitlines()
    assert "--show: opens an .onnx in Model Explorer through its ONNX adapter, which is not" in line
    assert "pip install model-explorer-onnx" in line
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.h5"))
