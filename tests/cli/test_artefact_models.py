"""The user's own artefacts open wherever a model opens, fast: tiny real artefacts
(tests/hostile/artefact_files.py) planned by the real runner and computed by the fake engine,
through the command line, the Python API, a bundle and a merge. (Real children run the demo's
artefacts in tests/engine/test_artefacts.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui import api
from segdiff_gui.core.runtime_defaults import openvino_precision_default
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here
from tests.hostile.artefact_files import ir_files, onnx_bytes, tflite_bytes


@pytest.fixture
def images(tmp_path) -> list[Path]:
    paths = []
    for index in range(2):
        path = tmp_path / f"cell_{index}.png"
        Image.fromarray(np.full((8, 8), 40 * index, np.uint8)).save(path)
        paths.append(path)
    return paths


@pytest.fixture
def artefacts(tmp_path) -> dict[str, Path]:
    (tmp_path / "model.tflite").write_bytes(tflite_bytes())
    (tmp_path / "one.tflite").write_bytes(tflite_bytes(batch=1))
    (tmp_path / "model.onnx").write_bytes(onnx_bytes())
    return {
        "tflite": tmp_path / "model.tflite",
        "fixed": tmp_path / "one.tflite",
        "onnx": tmp_path / "model.onnx",
        "ir": ir_files(tmp_path),
    }


def _openvino(label: str) -> str:
    """An OpenVINO run's label left at its default precision: it names the precision the
    planner predicts for this CPU (bf16 or f32), computed here as the planner does."""
    predicted = openvino_precision_default()
    return label.replace(" r0", f" {predicted} r0") if predicted else label


def _labels(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [run["label"] for run in json.loads(result.stdout)["runs"]]


def test_each_artefact_runs_under_its_own_runtime_from_the_command_line(
    artefacts, images, tmp_path, capsys, fake_engine
):
    cache = tmp_path / "cache"
    common = ("--cache", cache, "--repeats", "1", "--json")
    default = segdiff_here(capsys, "run", artefacts["tflite"], *images, *common)
    assert _labels(default) == ["litert cpu b1 r0", "litert cpu b64 r0"]
    # Its runtime's own knobs need no runtime=litert beside them.
    off = segdiff_here(capsys, "run", artefacts["tflite"], *images, "--config", "xnnpack=off",
                       *common)  # fmt: skip
    assert _labels(off) == ["litert cpu b1 xnnpack-off r0"]
    # A .tflite of a fixed batch of one: its default matrix is that batch alone.
    assert _labels(segdiff_here(capsys, "run", artefacts["fixed"], *images, *common)) == [
        "litert cpu b1 r0"
    ]
    onnx = segdiff_here(capsys, "run", artefacts["onnx"], *images, "--config", "batch=1",
                        "--config", "runtime=openvino", *common)  # fmt: skip
    assert _labels(onnx) == ["onnxruntime cpu b1 r0", _openvino("openvino cpu b1 r0")]
    ir = segdiff_here(capsys, "run", artefacts["ir"], *images, "--config", "threads=1", *common)
    assert _labels(ir) == [_openvino("openvino cpu b1 threads1 r0")]
    records = [
        ResultCache(cache).read_run(key, with_map=False) for key in ResultCache(cache).keys()
    ]
    assert {record.model_name for record in records} >= {"model.tflite", "model.onnx", "model.xml"}


def test_a_runtime_or_a_knob_that_does_not_fit_the_artefact_is_one_line(
    artefacts, images, tmp_path, capsys, fake_engine
):
    cache = ("--cache", tmp_path / "cache", "--repeats", "1")
    jax = segdiff_here(capsys, "run", artefacts["tflite"], *images, "--config", "runtime=jax",
                       *cache)  # fmt: skip
    assert jax.returncode == 2
    (line,) = jax.stderr.strip().splitlines()
    assert line.endswith(
        "model.tflite: is a LiteRT flatbuffer: it runs as it is under LiteRT, not under JAX "
        "(runtime=litert)"
    ), line
    converting = segdiff_here(capsys, "run", artefacts["tflite"], *images, "--config",
                              "runtime=litert-int8", *cache)  # fmt: skip
    assert converting.returncode == 2 and "(it converts a Keras model)" in converting.stderr
    xla = segdiff_here(capsys, "run", artefacts["onnx"], *images, "--config", "xla=on", *cache)
    assert xla.returncode == 2
    (line,) = xla.stderr.strip().splitlines()
    # Parsed from the artefact's own runtime: the registry's line, before any file is read.
    assert "xla=on means nothing under ONNX Runtime" in line


def test_an_artefact_s_runs_from_the_api_and_its_bundle_merges(
    artefacts, images, tmp_path, capsys, fake_engine
):
    server = tmp_path / "server"
    study = api.run(artefacts["ir"], images, ["batch=1", "batch=4"], repeats=1, cache=server,
                    progress=False)  # fmt: skip
    # Stored runs are named by what their child read back (the fake engine records none).
    b4 = "openvino cpu b4 r0"
    assert [run.label for run in study.runs] == ["openvino cpu b1 r0", b4]
    bundle = tmp_path / "ir-runs.h5"
    made = segdiff_here(capsys, "bundle", bundle, b4, "--cache", server)
    assert made.returncode == 0, made.stderr
    laptop = tmp_path / "laptop"
    merged = segdiff_here(capsys, "merge", bundle, "--cache", laptop)
    assert merged.returncode == 0 and "1 added" in merged.stdout
    (key,) = ResultCache(laptop).keys()
    record = ResultCache(laptop).read_run(key)
    assert record.model_name == "model.xml" and record.run_config.runtime == "openvino"
    assert np.array_equal(record.probabilities, ResultCache(server).read_run(key).probabilities)
