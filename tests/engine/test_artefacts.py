"""The user's own artefacts as models: the demo model converted as its users
convert it (tests/engine/artefact_files.py: float32, dynamic-range and full int8 ``.tflite``,
ONNX, an OpenVINO IR), each run by ``segdiff run`` as a model, in real children of its
runtime, and each map equal, bit for bit, to a plain script that runs the same file with that
runtime's documented API (tests/benchmarks/plain_artefact.py); the runtime's defaults read
back into provenance, and changed where a run asks."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from segdiff_gui.resources import demo_images
from segdiff_gui.storage import ResultCache
from tests.conftest import TESTS, segdiff
from tests.engine.knob_cells import assert_honoured

pytestmark = pytest.mark.slow

PLAIN = TESTS / "benchmarks" / "plain_artefact.py"

# Each artefact's runs: its own runtime at its defaults, and each default changed.
SPECS = {
    "float32": "runtime=litert",
    "float32 xnnpack-off": "runtime=litert,xnnpack=off",
    "float32 b4": "runtime=litert,batch=4",
    "dynamic": "runtime=litert",
    "int8": "runtime=litert",
    "onnx": "runtime=onnxruntime",
    "onnx ort-opt-disable": "runtime=onnxruntime,graph_optimization=disable",
    "onnx openvino": "runtime=openvino",
    "ir": "runtime=openvino",
    "ir f32": "runtime=openvino,inference_precision=f32",
    "ir threads1": "runtime=openvino,threads=1",
}
FILES = {
    "float32": "float32.tflite",
    "dynamic": "dynamic.tflite",
    "int8": "int8.tflite",
    "onnx": "model.onnx",
    "ir": "model.xml",
}
# What the plain script is given to run each as segdiff did (runtime, setting).
PLAIN_ARGS = {
    "float32": (),
    "float32 xnnpack-off": ("litert", "xnnpack=off"),
    "dynamic": (),
    "int8": (),
    "onnx": (),
    "onnx ort-opt-disable": ("onnxruntime", "graph_optimization=disable"),
    "onnx openvino": ("openvino",),
    "ir": (),
    "ir f32": ("openvino", "inference_precision=f32"),
    "ir threads1": ("openvino", "threads=1"),
}


def _file(name: str) -> str:
    return FILES[name.split(" ", 1)[0]]


@pytest.fixture(scope="module")
def artefact_runs(artefacts, tmp_path_factory):
    """Every spec's run, each artefact's in one ``segdiff run``, and the plain scripts' maps."""
    cache = ResultCache(tmp_path_factory.mktemp("artefact-runs") / "c")
    image = demo_images()[0]
    records, outputs = {}, {}
    for file in dict.fromkeys(FILES.values()):
        names = [name for name in SPECS if _file(name) == file]
        configs = [arg for name in names for arg in ("--config", SPECS[name])]
        result = segdiff(
            "run", artefacts / file, image, *demo_images()[1:4], *configs, "--repeats", "1",
            "--cache", cache.root, "--json",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        runs = json.loads(result.stdout)["runs"]
        assert [run["status"] for run in runs] == ["finished"] * len(names), runs
        for name, run in zip(names, runs, strict=True):
            records[name] = cache.read_run(run["key"])
    for name, args in PLAIN_ARGS.items():
        out = tmp_path_factory.mktemp("plain") / f"{name}.npy"
        subprocess.run(
            [sys.executable, PLAIN, artefacts / _file(name), out, image, *args],
            check=True,
            capture_output=True,
            timeout=300,
        )
        outputs[name] = np.load(out)
    return records, outputs


def test_each_artefact_s_map_is_the_plain_script_s_bit_for_bit(artefact_runs):
    records, outputs = artefact_runs
    for name, plain in outputs.items():
        record = records[name]
        assert record.probabilities.dtype == np.float32
        assert np.array_equal(record.probabilities, plain[0, ..., 0]), name
        provenance = record.provenance.to_dict()
        assert provenance["model_format"] == {"tflite": "tflite", "onnx": "onnx"}.get(
            _file(name).rsplit(".", 1)[1], "openvino-ir"
        )
        assert provenance["artefact"].endswith(", run as it is (not converted)")
        assert "conversion_key" not in provenance  # never converted, never stored as one
    # The quantized artefacts compute as they were quantized: not the float32 map.
    assert not np.array_equal(outputs["int8"], outputs["float32"])


def test_the_runtimes_defaults_are_read_back_and_a_changed_one_is_what_ran(artefact_runs):
    import openvino

    records, _ = artefact_runs
    said = {name: record.provenance.to_dict() for name, record in records.items()}
    assert said["float32"]["litert_xnnpack"] is True  # the interpreter's default delegate
    assert said["float32 xnnpack-off"]["litert_xnnpack"] is False
    assert said["onnx"]["onnxruntime_graph_optimization"] == "all"
    assert said["onnx ort-opt-disable"]["onnxruntime_graph_optimization"] == "disable"
    # OpenVINO's default precision is its CPU plugin's on this CPU: asked of OpenVINO here.
    hint = openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    assert said["ir"]["inference_precision"] == said["onnx openvino"]["inference_precision"]
    assert said["ir"]["inference_precision"] == str(hint)
    assert said["ir"]["defaults_in_effect"]["inference_precision"] == str(hint)
    assert said["ir f32"]["inference_precision"] == "f32"
    assert said["ir threads1"]["openvino_threads"] == 1
    assert said["ir"]["openvino_threads"] >= 1  # the plugin's own count, read back
    assert "keras_backend" not in said["ir"]  # no Keras in an artefact's child
    lines = records["float32"].provenance.in_effect_lines(records["float32"].run_config)
    assert "XNNPACK on: the interpreter's default" in lines
    assert_honoured(SPECS, records)


def test_a_fixed_batch_artefact_skips_other_batches_in_one_line(artefacts, tmp_path):
    result = segdiff(
        "run", artefacts / "int8.tflite", *demo_images()[:2], "--config", "batch=1",
        "--config", "batch=4", "--repeats", "1", "--cache", tmp_path / "c", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [run["label"] for run in runs] == ["litert cpu b1 r0"]
    skipped = [line for line in result.stderr.splitlines() if "batch=4" in line]
    assert len(skipped) == 1 and "has a fixed batch of 1" in skipped[0], result.stderr
