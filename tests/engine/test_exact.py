"""The exact reference: ``precision=float64`` computes the Keras model in float64 on
its float32 weights and input widened exactly, under TensorFlow, JAX and PyTorch, and keeps the
map in float64. Shown against a NumPy float64 computation of a small model, on the demo (read
back float64, cached, float32's rounding away from the float32 run), on a MobileNet-style
encoder, and refused in one line where TensorFlow has no float64 kernel for a layer's op."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.core.config import Preprocessing
from segdiff_gui.core.preprocess import prepare_input
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff
from tests.engine.demo_runs import EXACT, module_runs
from tests.engine.knob_cells import assert_honoured

pytestmark = pytest.mark.slow

SPECS = EXACT  # tests/engine/demo_runs.py: computed there with the runtimes' and TF32 runs


def _run(model: Path, image: Path, cache: Path, *specs: str) -> dict[str, dict]:
    """``segdiff run`` of ``specs`` on one image; each run's JSON entry by its spec."""
    configs = [word for spec in specs for word in ("--config", spec)]
    result = segdiff("run", model, image, *configs, "--repeats", "1", "--cache", cache, "--json")
    assert result.returncode in (0, 1), result.stderr
    runs = json.loads(result.stdout)["runs"]
    return dict(zip(specs, runs, strict=True))  # in the order asked for


def _ulps_from(exact: np.ndarray, values: np.ndarray) -> np.ndarray:
    """How many float32 steps, measured at the exact value, ``values`` lie from ``exact``."""
    step = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(values.astype(np.float64) - exact) / step


@pytest.fixture(scope="module")
def demo_runs(demo, demo_runtime_runs, tmp_path_factory):
    """The specs' runs of the demo's first image by the real ``segdiff run`` (with the
    runtimes' and TF32 tests' runs, tests/engine/demo_runs.py), in a cache of these alone."""
    model, images = demo
    root = tmp_path_factory.mktemp("exact") / "cache"
    cache, entries = module_runs(demo_runtime_runs, root, SPECS)
    assert all(entry["status"] == "finished" for entry in entries.values()), entries
    by_name = {name: cache.read_run(entry["key"]) for name, entry in entries.items()}
    return model, images[0], root, by_name


def test_the_exact_run_is_honoured_under_tensorflow_jax_and_pytorch(demo_runs):
    """The knob × runtime table's cells for precision=float64, by the map moving or the dtype
    read back."""
    *_, records = demo_runs
    how = assert_honoured(SPECS, records)
    assert set(how) == {"fp64: precision", "jax fp64: precision", "jax fp64: xla",
                        "torch fp64: precision"}, how  # fmt: skip


def test_the_demo_exact_map_reads_back_float64_is_cached_and_float32_rounds_near_it(demo_runs):
    model, image, root, records = demo_runs
    exact = records["fp64"].probabilities
    for name in ("fp64", "jax fp64", "torch fp64"):
        assert records[name].probabilities.dtype == np.dtype("<f8"), name
        assert records[name].provenance.to_dict()["compute_dtype"] == "float64", name
    # Three runtimes' float64 kernels agree to float64's rounding, far below a float32 step.
    for name in ("jax fp64", "torch fp64"):
        apart = float(np.abs(records[name].probabilities - exact).max())
        print(f"{name} vs TensorFlow fp64: max |Δ| {apart:.3g}")
        assert apart < 1e-14, name
    float32 = records["tf"].probabilities
    delta = np.abs(float32.astype(np.float64) - exact)
    ulps = _ulps_from(exact, float32)
    print(f"demo float32 vs exact: max |Δ| {delta.max():.3g}, max {ulps.max():.1f} ULP")
    assert 0 < delta.max() < 1e-5 and ulps.max() < 1000  # float32's rounding, not a bug's
    # Asked again: every run, the exact ones too, comes from the cache.
    again = _run(model, image, root, *SPECS.values())
    assert {entry["status"] for entry in again.values()} == {"cached"}, again


def test_a_cache_holding_an_exact_run_lists_and_compares(demo_runs):
    """``ls`` lists it; ``compare`` compares the float32 runs and leaves it beside them (its
    own comparison, not a float32 run rounded)."""
    *_, root, records = demo_runs
    listed = segdiff("ls", "--cache", root, "--json")
    assert listed.returncode == 0, listed.stderr
    precisions = {run["label"]: run["config"].get("precision") for run in json.loads(listed.stdout)}
    assert precisions[records["fp64"].label] == "float64", precisions
    compared = segdiff("compare", "--cache", root, "--json")
    assert compared.returncode == 0, compared.stderr
    (group,) = json.loads(compared.stdout)
    assert group["reference"] == records["tf"].label  # the only float32 run: none beside it
    assert group["comparisons"] == [], group["comparisons"]
    plain = segdiff("compare", "--cache", root)
    assert plain.returncode == 0, plain.stderr
    text = " ".join(plain.stdout.split())
    # The lone float32 run is measured against the exact run, never compared as one of two.
    assert f"only {records['tf'].label}; against the exact run:" in text, text
    assert f"Exact: {records['fp64'].label}, the model in float64" in text, text
    assert "nothing to compare with" not in text, text


def _numpy_conv_norm(weights: dict[str, np.ndarray], image: np.ndarray) -> np.ndarray:
    """The fixture's conv_norm.keras in NumPy float64: a 3×3 'same' convolution with bias,
    batch normalisation with its moving statistics, a sigmoid."""
    x = image.astype(np.float64)[..., 0]
    kernel = weights["kernel"].astype(np.float64)[:, :, 0, 0]
    padded = np.pad(x, 1)
    conv = sum(
        kernel[i, j] * padded[i : i + x.shape[0], j : j + x.shape[1]]
        for i in range(3)
        for j in range(3)
    ) + float(weights["bias"][0])
    mean, variance = float(weights["mean"][0]), float(weights["variance"][0])
    gamma, beta = float(weights["gamma"][0]), float(weights["beta"][0])
    normed = (conv - mean) / np.sqrt(variance + float(weights["epsilon"])) * gamma + beta
    return 1.0 / (1.0 + np.exp(-normed))


def test_the_exact_map_is_what_numpy_computes_in_float64(models, small_images, tmp_path):
    entries = _run(models / "conv_norm.keras", small_images[0], tmp_path, "precision=fp64")
    (entry,) = entries.values()
    assert entry["status"] == "finished", entry
    record = ResultCache(tmp_path).read_run(entry["key"])
    assert record.probabilities.dtype == np.dtype("<f8")
    decoded = np.asarray(Image.open(small_images[0]))[..., None]
    image = prepare_input(decoded, Preprocessing(), 32, 32, 1, small_images[0])
    assert image.dtype == np.float32  # the float32 runs' input, widened exactly
    expected = _numpy_conv_norm(dict(np.load(models / "conv_norm.npz")), image)
    error = np.abs(record.probabilities - expected)
    ulps = _ulps_from(expected, record.probabilities)
    print(f"float64 map vs NumPy float64: max |Δ| {error.max():.3g}, max {ulps.max():.2g} ULP")
    assert ulps.max() < 1  # within one float32 step of the exact value …
    assert error.max() < 1e-15  # … in fact within float64's rounding of it


def test_a_mobilenet_style_encoder_runs_exact(models, small_images, tmp_path):
    entries = _run(models / "mobilenet.keras", small_images[1], tmp_path, "batch=1",
                   "precision=fp64")  # fmt: skip
    assert {entry["status"] for entry in entries.values()} == {"finished"}, entries
    cache = ResultCache(tmp_path)
    float32, exact = (cache.read_run(entry["key"]) for entry in entries.values())
    assert exact.probabilities.dtype == np.dtype("<f8")
    assert exact.provenance.to_dict()["compute_dtype"] == "float64"
    ulps = _ulps_from(exact.probabilities, float32.probabilities)
    print(f"MobileNet-style float32 vs exact: max {ulps.max():.1f} ULP")
    assert 0 < ulps.max() < 1000


def test_an_op_without_a_float64_kernel_is_refused_naming_it_and_its_layer(
    models, small_images, tmp_path
):
    entries = _run(models / "pool3d.keras", small_images[2], tmp_path, "batch=1",
                   "precision=fp64")  # fmt: skip
    float32, exact = entries.values()
    assert float32["status"] == "finished", float32
    assert exact["status"] == "failed", exact
    said = exact["error"]
    assert "\n" not in said, said
    assert said.startswith(
        "layer 'pool3d' (MaxPooling3D): TensorFlow has no float64 kernel for op MaxPool3D on "
        "the CPU"
    ), said
    assert "runtime=jax" in said, said


def test_nested_models_compute_in_float64_across_their_boundaries(models, small_images, tmp_path):
    """A U-Net whose encoder is a functional model and whose decoder block a Sequential one:
    every nested model's input is float64 too, so its exact map is the flat twin's (a nested
    input left float32 rounds the activations there: ~1e-8 apart). A precision policy
    reaches the nested models' layers as well: bfloat16, run beside the nested one's exact run
    in its child (tests/engine/test_formats.py's nested model no longer starts one)."""
    cache = ResultCache(tmp_path)
    nested = _run(models / "encoder_unet.keras", small_images[3], tmp_path, "precision=fp64",
                  "precision=bf16")  # fmt: skip
    (flat,) = _run(models / "encoder_unet_flat.keras", small_images[3], tmp_path,
                   "precision=fp64").values()  # fmt: skip
    entries = [nested["precision=fp64"], flat, nested["precision=bf16"]]
    assert {entry["status"] for entry in entries} == {"finished"}, entries
    maps = [cache.read_run(entry["key"]).probabilities for entry in entries[:2]]
    bf16 = cache.read_run(nested["precision=bf16"]["key"])
    assert bf16.provenance.to_dict()["compute_dtype"] == "bfloat16"
    apart = float(np.abs(maps[0] - maps[1]).max())
    print(f"nested vs flat exact maps: max |Δ| {apart:.3g}")
    assert apart < 1e-15
