"""The user's full-int8 ``.tflite`` (calibrated on the demo's own images: a representative
dataset, tests/engine/artefact_files.py) beside its Keras source, in real children:
one study of both models' runs, with the artefact's flips and the exact errors of both; and
``segdiff layers`` on the artefact against its source, every tensor matched to a layer by the
graph, each layer's error and the layer where it is born, written as Model Explorer's node data
on the artefact's own operators (LiteRT's interpreter says which operator each index is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import segdiff
from tests.factories import assert_node_data

pytestmark = pytest.mark.slow

# What each Keras layer class of the demo is computed by in a LiteRT graph.
OPERATORS = {
    "Conv2D": {"CONV_2D"},
    "MaxPooling2D": {"MAX_POOL_2D"},
    "Concatenate": {"CONCATENATION"},
    "UpSampling2D": {"RESIZE_NEAREST_NEIGHBOR", "RESHAPE", "TILE"},
    "sigmoid": {"LOGISTIC"},  # a Conv2D's own sigmoid, not fused: its output is the layer's
}
DEMO_LAYERS = [
    "enc1_1", "enc1_2", "pool1", "enc2_1", "enc2_2", "pool2", "mid_1", "mid_2", "up2", "skip2",
    "dec2_1", "dec2_2", "up1", "skip1", "dec1_1", "dec1_2", "foreground",
]  # fmt: skip


@pytest.fixture(scope="module")
def beside(artefacts, demo4, tmp_path_factory):
    """The int8 artefact's runs and its source's, then its layers against the source's."""
    model, images = demo4
    artefact = artefacts / "int8.tflite"
    cache = tmp_path_factory.mktemp("beside") / "cache"
    common = (artefact, *images, "--source", model, "--cache", cache)
    ran = segdiff("run", *common, "--repeats", "1", "--json")
    assert ran.returncode == 0, ran.stderr
    compared = segdiff("compare", "--cache", cache, "--json")
    assert compared.returncode == 0, compared.stderr
    explorer = cache.parent / "errors.json"
    layers = segdiff("layers", *common, "--json", "--model-explorer", explorer)
    assert layers.returncode == 0, layers.stderr
    return {
        "artefact": artefact,
        "model": model,
        "run": json.loads(ran.stdout),
        "compare": json.loads(compared.stdout),
        "layers": json.loads(layers.stdout),
        "explorer": explorer,
    }


def test_the_int8_artefact_s_flips_and_the_exact_errors_of_both_are_one_study(beside):
    # Its batch is fixed at one: the source runs at batch 1 beside it, and in float64.
    labels = [run["label"] for run in beside["run"]["runs"]]
    assert labels == ["cpu b1 r0", "cpu b1 fp64 r0", "int8.tflite litert cpu b1 r0"]
    (study,) = beside["compare"]
    assert study["model"] == beside["model"].name and study["reference"] == "cpu b1 r0"
    rows = {row["label"]: row for row in study["comparisons"]}
    int8 = rows["int8.tflite litert cpu b1 r0"]
    assert int8["flips"] > 0 and not int8["bitwise_equal"]  # int8 moves the mask
    exact = study["exact"]
    assert exact["run"] == "cpu b1 fp64 r0"
    errors = {row["label"]: row for row in exact["errors"]}
    assert set(errors) == {"cpu b1 r0", "int8.tflite litert cpu b1 r0"}
    # The exact map decides each flip: the int8 run is wrong where the source's is not.
    assert errors["int8.tflite litert cpu b1 r0"]["wrong"] > errors["cpu b1 r0"]["wrong"]
    assert errors["int8.tflite litert cpu b1 r0"]["max_abs"] > 1000 * errors["cpu b1 r0"]["max_abs"]


def _operators(artefact: Path) -> dict[str, str]:
    """Each operator of the artefact's main graph by its index, as LiteRT's interpreter names it
    (Model Explorer's node ids of a ``.tflite`` are these indices)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(artefact))
    return {str(op["index"]): op["op_name"] for op in interpreter._get_ops_details()}


def test_layers_names_each_matched_layer_s_error_and_where_it_is_born(beside):
    found = beside["layers"]
    assert found["model"] == "int8.tflite" and found["source"] == beside["model"].name
    assert found["other"]["artefact"] and found["reference"]["label"] == "cpu b1 r0"
    # Both probes are their plain runs, bit for bit: the figures are the runs' own.
    assert found["reference"]["final"]["bitwise_equal"] and found["other"]["final"]["bitwise_equal"]
    layers = found["layers"]
    operators = _operators(beside["artefact"])
    classes = {"enc": "Conv2D", "dec": "Conv2D", "mid": "Conv2D", "poo": "MaxPooling2D",
               "ski": "Concatenate", "up": "UpSampling2D", "for": "sigmoid"}  # fmt: skip
    for layer in layers:
        # Every matched layer says its error, and its int8 tensor's scale and zero point.
        assert layer["max_abs"] >= layer["mean_abs"] >= 0 and layer["relative_error"] >= 0
        assert layer["snr_db"] is not None and layer["scale"] > 0
        assert -128 <= layer["zero_point"] <= 127
        assert layer["max_steps"] == pytest.approx(layer["max_abs"] / layer["scale"])
        # Matched by the graph: the operator whose output it is does what its layer does.
        kind = next(kind for prefix, kind in classes.items() if layer["name"].startswith(prefix))
        assert operators[layer["node"]] in OPERATORS[kind], (layer["name"], layer["node"])
    convolutions = [layer for layer in layers if layer["name"][:3] in ("enc", "dec", "mid")]
    assert len({layer["node"] for layer in convolutions}) == len(convolutions) == 10
    # The demo's every layer is matched (what is not would be listed, with why).
    assert [layer["name"] for layer in layers] == DEMO_LAYERS and found["unmatched"] == []
    # Born where the first layer differs, in execution order.
    first = next(layer["name"] for layer in layers if layer["differing_fraction"] > 0)
    assert found["first_differing"] == first == "enc1_1"
    # The output layer's error is the map's: the study's max |Δ| of the artefact's run.
    (study,) = beside["compare"]
    int8 = next(r for r in study["comparisons"] if r["label"].startswith("int8.tflite"))
    assert layers[-1]["name"] == "foreground"
    assert layers[-1]["max_abs"] == pytest.approx(int8["max_abs"], rel=1e-6)


def _explorer_nodes(artefact: Path) -> dict[str, str] | None:
    """The artefact's nodes as Model Explorer's own LiteRT adapter numbers them (its id: the
    operator's label), where the explorer extra is installed."""
    try:
        from model_explorer.builtin_tflite_flatbuffer_adapter import (
            BuiltinTfliteFlatbufferAdapter,
        )
    except ImportError:
        return None
    converted = BuiltinTfliteFlatbufferAdapter().convert(str(artefact), {})
    (graph, *_) = converted["graphCollections"][0].graphs
    return {node["id"]: node["label"] for node in graph["nodes"]}


def test_the_model_explorer_file_gives_each_operator_its_layer_s_error(beside):
    data = json.loads(beside["explorer"].read_text(encoding="utf-8"))
    assert_node_data(data)
    operators = _operators(beside["artefact"])
    explorer = _explorer_nodes(beside["artefact"])
    if explorer is not None:  # its node ids are the operators' indices, its labels their names
        assert {node: explorer[node] for node in data["results"]} == {
            node: operators[node].lower() for node in data["results"]
        }
    errors = {layer["node"]: layer["relative_error"] for layer in beside["layers"]["layers"]}
    assert set(data["results"]) <= set(operators)
    assert {node: result["value"] for node, result in data["results"].items()} == errors
