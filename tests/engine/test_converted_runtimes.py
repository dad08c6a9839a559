"""The demo models and a legacy tf-keras ``.h5`` converted for deployment and run by LiteRT
(float32, float16 weights, dynamic-range int8, full int8) and ONNX Runtime on the CPU, through
the real command line: LiteRT's four conversions in one child, ONNX Runtime and TensorFlow each
in its own, every conversion's artefact cached and reused,
every map cached bit-exactly, and a conversion the converters refuse said in one line."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.hashing import hash_path
from segdiff_gui.core.runtimes import calibration_tag
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.converted import ConvertedModel, ConvertedStore
from tests.conftest import copy_labelled, segdiff, segdiff_here
from tests.engine.knob_cells import assert_honoured

pytestmark = pytest.mark.slow

CONVERTED = ("litert", "litert-fp16", "litert-dynamic-int8", "litert-int8", "onnxruntime")
LITERT = CONVERTED[:4]
# Keras on TensorFlow, every conversion, and the knobs a converted runtime maps (batch, and
# threads, and ONNX Runtime's determinism: options of each run's own session, so in the
# runtime's one child).
SPECS = {
    "tensorflow": "batch=1",
    **{name: f"runtime={name}" for name in CONVERTED},
    **{f"{name} b4": f"runtime={name},batch=4" for name in CONVERTED},
    **{f"{name} threads1": f"runtime={name},threads=1" for name in LITERT},
    "onnxruntime threads1": "runtime=onnxruntime,threads=1,determinism=on",
    # The delegate and the graph optimisation level: each run's own session, read back.
    **{f"{name} xnnpack-{value}": f"runtime={name},xnnpack={value}" for name in LITERT
       for value in ("on", "off")},
    "onnxruntime ort-opt-disable": "runtime=onnxruntime,graph_optimization=disable",
}  # fmt: skip
LABELS = {
    "tensorflow": "cpu b1 r0",
    **{name: f"{name} cpu b1 r0" for name in CONVERTED},
    **{f"{name} b4": f"{name} cpu b4 r0" for name in CONVERTED},
    **{f"{name} threads1": f"{name} cpu b1 threads1 r0" for name in LITERT},
    "onnxruntime threads1": "onnxruntime cpu b1 det threads1 r0",
    **{f"{name} xnnpack-{value}": f"{name} cpu b1 xnnpack-{value} r0" for name in LITERT
       for value in ("on", "off")},
    "onnxruntime ort-opt-disable": "onnxruntime cpu b1 ort-opt-disable r0",
}  # fmt: skip


def _run(model, images, cache, specs, *options, capsys=None):
    """``segdiff run --json`` of ``specs``: its runs. With ``capsys``, its ``main`` runs in
    this process (its children are still real); without (a module's fixture), in its own."""
    configs = [arg for spec in specs for arg in ("--config", spec)]
    args = (
        "run", model, *images, *configs, *options, "--repeats", "1", "--cache", cache.root,
        "--json",
    )  # fmt: skip
    result = segdiff_here(capsys, *args) if capsys is not None else segdiff(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["runs"]


def _converted_files(cache: ResultCache) -> dict[Path, float]:
    return {path: path.stat().st_mtime_ns for path in (cache.root / "converted").rglob("*.h5")}


@pytest.fixture(scope="module")
def demo_runs(demo4, demo_cache, tmp_path_factory):
    """Every spec's run. TensorFlow's, the reference, is the demo's own batch-1 run of the
    first image (``segdiff demo``'s real child, the same key): served, no child of its own."""
    model, images = demo4
    cache = copy_labelled(demo_cache, tmp_path_factory.mktemp("converted") / "c", {"cpu b1 r0"})
    runs = _run(model, images, cache, SPECS.values())
    assert [run["status"] for run in runs] == ["cached"] + ["finished"] * (len(SPECS) - 1), runs
    # A full-int8 label names its calibration set (cal4#…): looked up without it.
    keys = {re.sub(r" cal\d+#\w+", "", run["label"]): run["key"] for run in runs}
    return cache, {name: cache.read_run(keys[label]) for name, label in LABELS.items()}


def test_every_runtime_runs_the_demo_on_the_cpu_litert_conversions_in_one_child(demo_runs):
    _, records = demo_runs
    pids = {records[name].provenance.to_dict()["process_id"] for name in ("tensorflow", *CONVERTED)}
    assert len(pids) == 3  # TensorFlow, LiteRT's four conversions, ONNX Runtime
    assert len({records[name].provenance.to_dict()["process_id"] for name in LITERT}) == 1
    for name in CONVERTED:
        provenance = records[name].provenance.to_dict()
        assert provenance["runtime"] == name
        assert provenance["device"] == provenance["weights_device"] == "cpu:0"
        assert provenance["conversion_runtime"] == name
        assert provenance["conversion_bytes"] > 10_000
        assert provenance["conversion_converters"]["tensorflow"]
        assert re.sub(r" cal\d+#\w+", "", records[name].label) == f"{name} cpu b1 r0"
    assert records["onnxruntime"].provenance.to_dict()["conversion_converters"]["tf2onnx"]
    assert records["litert-int8"].provenance.to_dict()["compute_dtype"].startswith("int8")
    assert records["litert-dynamic-int8"].provenance.to_dict()["conversion_quantized_tensors"] > 0


def test_threads_and_determinism_reach_the_runtimes_sessions(demo_runs):
    _, records = demo_runs
    assert records["litert threads1"].provenance.to_dict()["litert_threads"] == 1
    assert records["litert"].provenance.to_dict()["litert_threads"] == "the interpreter's default"
    # ONNX Runtime's as its sessions report them: each run its own session, in one child.
    onnx = records["onnxruntime threads1"].provenance.to_dict()
    assert onnx["onnxruntime_threads"] == onnx["intra_op_threads"] == 1
    assert onnx["onnxruntime_deterministic_compute"] and onnx["op_determinism"]
    plain = records["onnxruntime"].provenance.to_dict()
    assert plain["onnxruntime_threads"] == "ONNX Runtime's default"
    assert plain["intra_op_threads"] == 0 and plain["op_determinism"] is False
    # Session options share the runtime's child: one TensorFlow import, one conversion.
    for name in ("litert", "onnxruntime"):
        pids = {records[n].provenance.to_dict()["process_id"] for n in (name, f"{name} threads1")}
        assert len(pids) == 1, name
    # One conversion serves every run of a runtime: batch and threads do not convert again.
    keys = {
        records[name].provenance.to_dict()["conversion_key"] for name in ("litert", "litert b4")
    }
    assert len(keys) == 1
    threads = records["litert threads1"].provenance.to_dict()
    assert threads["conversion_key"] == records["litert"].provenance.to_dict()["conversion_key"]


def test_the_delegate_and_the_optimisation_level_are_read_back_at_their_defaults(demo_runs):
    _, records = demo_runs
    for name in LITERT:  # the interpreter's default applies XNNPACK: read back, not assumed
        plain = records[name].provenance.to_dict()
        assert plain["litert_xnnpack"] is True, name
        assert plain["delegate"] == "XNNPACK (the interpreter's default)"
        off = records[f"{name} xnnpack-off"].provenance.to_dict()
        assert off["litert_xnnpack"] is False
        assert off["delegate"] == "the interpreter's builtin kernels (set)"
        assert records[f"{name} xnnpack-on"].provenance.to_dict()["litert_xnnpack"] is True
    assert records["onnxruntime"].provenance.to_dict()["onnxruntime_graph_optimization"] == "all"
    disabled = records["onnxruntime ort-opt-disable"].provenance.to_dict()
    assert disabled["onnxruntime_graph_optimization"] == "disable"


def test_conversions_move_the_demo_as_their_precision_says(demo_runs):
    _, records = demo_runs
    reference = records["tensorflow"].probabilities
    effect = {name: compare_maps(reference, records[name].probabilities) for name in CONVERTED}
    # float32 conversions: every pixel within a few float32 steps of TensorFlow's (what few
    # pixels lie that close to the cutoff, if any, depends on the CPU's kernels).
    for name in ("litert", "onnxruntime"):
        assert 0 < effect[name].max_abs < 1e-6, name
    assert effect["litert"].max_ulp < 1000
    # Quantized: visibly apart, and int8 flips pixels at 0.5 on the demo.
    assert 1e-4 < effect["litert-fp16"].max_abs < 1e-2
    assert effect["litert-dynamic-int8"].max_abs > 1e-3
    assert effect["litert-dynamic-int8"].flips > 0 and effect["litert-int8"].flips > 0
    # The batch does not change LiteRT's map (XNNPACK's kernels are batch-invariant here).
    assert records["litert b4"].probabilities.tobytes() == records["litert"].probabilities.tobytes()


def test_full_int8_is_calibrated_on_the_sets_images_and_keyed_by_them(demo_runs, demo4):
    _, images = demo4
    _, records = demo_runs
    calibration = records["litert-int8"].provenance.to_dict()["calibration_hashes"]
    assert calibration == sorted(hash_path(path) for path in images)
    assert "calibration_hashes" not in records["litert"].provenance.to_dict()
    # The label says which images: runs calibrated on others are never its repeats.
    assert records["litert-int8"].label == f"litert-int8 cpu b1 {calibration_tag(calibration)} r0"


def test_a_second_run_is_served_from_the_cache_without_converting_again(demo_runs, demo4, capsys):
    cache, records = demo_runs
    model, images = demo4
    before = _converted_files(cache)
    assert len(before) == len(CONVERTED)
    runs = _run(model, images, cache, SPECS.values(), capsys=capsys)
    assert {run["status"] for run in runs} == {"cached"}
    for name, record in records.items():
        again = cache.read_run(record.key)
        assert again.probabilities.tobytes() == record.probabilities.tobytes(), name
    # A new run of a converted runtime (batch 2) reuses the stored artefact.
    (run,) = _run(model, images, cache, ["runtime=litert-int8,batch=2"], capsys=capsys)
    assert run["status"] == "finished"
    provenance = cache.read_run(run["key"]).provenance.to_dict()
    assert provenance["conversion_reused"]
    assert (
        provenance["conversion_key"]
        == records["litert-int8"].provenance.to_dict()["conversion_key"]
    )
    assert _converted_files(cache) == before


def _copy_without(demo_runs, name: str, tmp_path: Path) -> tuple[ResultCache, Path]:
    """A copy of the demo's cache without the run ``name`` (asked again, it is computed), and
    the stored artefact that run was computed on."""
    source, records = demo_runs
    cache = ResultCache(shutil.copytree(source.root, tmp_path / "cache"))
    cache.run_path(records[name].key).unlink()
    key = records[name].provenance.to_dict()["conversion_key"]
    (stored,) = (path for path in _converted_files(cache) if path.stem == key)
    return cache, stored


def test_a_damaged_artefact_is_converted_again_not_an_error(demo_runs, demo4, tmp_path, capsys):
    model, images = demo4
    _, records = demo_runs
    cache, stored = _copy_without(demo_runs, "litert threads1", tmp_path)
    data = bytearray(stored.read_bytes())
    data[-64] ^= 0xFF  # inside the artefact's bytes, at the file's end
    stored.write_bytes(bytes(data))
    (second,) = _run(model, images, cache, [SPECS["litert threads1"]], capsys=capsys)
    provenance = cache.read_run(second["key"]).provenance.to_dict()
    assert second["status"] == "finished" and not provenance["conversion_reused"]
    assert (
        cache.read_run(second["key"]).probabilities.tobytes()
        == records["litert threads1"].probabilities.tobytes()
    )


def test_a_planted_onnx_artefact_with_external_data_is_never_opened(demo_runs, demo4, tmp_path):
    """An artefact at the right key, with the right checksum, whose tensor
    is kept as ONNX external data naming a file of the user's: ONNX Runtime would read that
    file (relative to the working folder) into the model. It is converted again instead."""
    import onnx
    from onnx import numpy_helper

    model, images = demo4
    _, records = demo_runs
    cache, path = _copy_without(demo_runs, "onnxruntime threads1", tmp_path)
    store = ConvertedStore(cache.root)
    stored = store.read(path.stem)
    planted = onnx.load_from_string(stored.data)
    tensor = max(planted.graph.initializer, key=lambda t: numpy_helper.to_array(t).nbytes)
    size = numpy_helper.to_array(tensor).nbytes
    home = tmp_path / "home"
    home.mkdir()
    (home / "credentials").write_bytes(b"\x41" * size)  # what a planted artefact would read
    for field in ("raw_data", "float_data"):
        tensor.ClearField(field)
    for key, value in (("location", "credentials"), ("offset", "0"), ("length", str(size))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    tensor.data_location = onnx.TensorProto.EXTERNAL
    store.write(ConvertedModel(stored.ingredients, planted.SerializeToString(), stored.facts))
    configs = ["--config", SPECS["onnxruntime threads1"]]
    result = segdiff(
        "run", model, *images, *configs, "--repeats", "1", "--cache", cache.root, "--json",
        cwd=home,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (second,) = json.loads(result.stdout)["runs"]
    provenance = cache.read_run(second["key"]).provenance.to_dict()
    assert second["status"] == "finished" and not provenance["conversion_reused"]
    assert (
        cache.read_run(second["key"]).probabilities.tobytes()
        == records["onnxruntime threads1"].probabilities.tobytes()
    )
    # The artefact stored now is the converter's own again: every tensor inside it. (The
    # engine's own check is not imported here: it would bring Keras into the test process,
    # and other tests check that a cache hit imports none.)
    again = onnx.load_from_string(store.read(path.stem).data)
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in again.graph.initializer)


def test_the_softmax_demo_converts_with_its_classes(demo, tmp_path, capsys):
    _, images = demo
    model = Path(demo[0]).with_name("unet_softmax3.keras")
    cache = ResultCache(tmp_path / "cache")
    specs = ["batch=1", "runtime=litert", "runtime=onnxruntime", "runtime=litert-int8"]
    runs = _run(model, images[:2], cache, specs, capsys=capsys)
    # Full int8's softmax sums to 1 only within int8's steps (1/256): still probabilities.
    assert all(run["status"] == "finished" for run in runs), runs
    maps = [cache.read_run(run["key"]) for run in runs]
    assert {record.kind for record in maps} == {"softmax"}
    reference = maps[0].probabilities
    for record in maps[1:3]:
        assert record.probabilities.shape == reference.shape
        assert np.abs(record.probabilities - reference).max() < 1e-5
    int8 = maps[3].probabilities
    assert 1e-3 < np.abs(int8.sum(axis=-1) - 1).max() <= 2e-2


def test_a_legacy_tf_keras_h5_runs_under_onnx_runtime_jax_and_torch(
    models, small_images, tmp_path, capsys
):
    """The legacy .h5 under ONNX Runtime and Keras's JAX and PyTorch backends, in one request:
    TensorFlow's child serves as the reference of them all. (LiteRT's four conversions of a
    legacy .h5 run in the free-size U-Net's test below.)"""
    cache = ResultCache(tmp_path / "cache")
    specs = ["batch=1", "runtime=onnxruntime"]
    keras_backends = ["runtime=jax", "runtime=torch,batch=2"]
    runs = _run(
        models / "tiny_tfkeras.h5", small_images, cache, [*specs, *keras_backends], capsys=capsys
    )
    assert all(run["status"] == "finished" for run in runs), runs
    records = [cache.read_run(run["key"]) for run in runs]
    reference = records[0].probabilities
    # JAX and PyTorch load the legacy file too, and agree with TensorFlow to float32 rounding.
    jax, torch = records[len(specs) :]
    assert (jax.label, torch.label) == ("jax cpu b1 r0", "torch cpu b2 r0")
    for other in (jax, torch):
        np.testing.assert_allclose(other.probabilities, reference, atol=1e-6)
    records = records[: len(specs)]
    onnx = records[-1].probabilities
    ulp = np.abs(reference.view(np.int32).astype(np.int64) - onnx.view(np.int32))
    assert ulp.max() <= 8  # ONNX Runtime float32: within a few ULP of Keras on this model
    assert {record.provenance.to_dict()["model_format"] for record in records} == {"h5"}


def test_an_op_the_converters_refuse_is_one_line_naming_it(models, small_images, tmp_path, capsys):
    cache = ResultCache(tmp_path / "cache")
    specs = ["runtime=litert", "runtime=onnxruntime"]
    configs = [arg for spec in specs for arg in ("--config", spec)]
    result = segdiff_here(
        capsys, "run", models / "erfinv.keras", *small_images, *configs, "--repeats", "1",
        "--cache", cache.root, "--json",
    )  # fmt: skip
    runs = {run["label"]: run for run in json.loads(result.stdout)["runs"]}
    assert result.returncode == 1
    litert, onnx = runs["litert cpu b1 r0"], runs["onnxruntime cpu b1 r0"]
    assert litert["status"] == onnx["status"] == "failed"
    assert "cannot be converted to LiteRT: op Erfinv (layer erfinv)" in litert["error"]
    assert "cannot be converted to ONNX: op Erfinv (layer erfinv)" in onnx["error"]
    for run in (litert, onnx):
        assert "\n" not in run["error"] and "Traceback" not in run["error"]
    assert not _converted_files(cache)


def test_a_unet_of_free_input_size_runs_under_litert_at_each_size_it_is_given(
    models, demo, tmp_path, capsys
):
    """A tf-keras U-Net saved with input (None, None, 3) converts for LiteRT at
    the size of the images it runs (the batch stays free): one artefact per size, each keyed
    and stored with its size, for demo images and an image of another size in one request."""
    _, images = demo
    other = tmp_path / "other.png"
    rng = np.random.default_rng(5)
    Image.fromarray(rng.integers(0, 256, (72, 100, 3), dtype=np.uint8)).save(other)
    cache = ResultCache(tmp_path / "cache")
    model = models / "free_unet_tfkeras.h5"
    specs = ["batch=1", *(f"runtime={name}" for name in LITERT)]
    targets = [images[0], images[1], other]
    runs = _run(model, targets, cache, specs, "--color", "rgb", "--sweep", capsys=capsys)
    assert len(runs) == 3 * len(specs)
    assert all(run["status"] == "finished" for run in runs), [run.get("error") for run in runs]
    records = [cache.read_run(run["key"]) for run in runs]
    by_image = {record.target_name: {} for record in records}
    for record in records:
        by_image[record.target_name][record.provenance.to_dict()["runtime"]] = record
    # A legacy .h5 (tf-keras) under every LiteRT conversion.
    assert {record.provenance.to_dict()["model_format"] for record in records} == {"h5"}
    calibration = sorted(hash_path(path) for path in targets)
    for name, shape in (("cell_00.png", (256, 256)), ("other.png", (72, 100))):
        reference = by_image[name]["tensorflow"].probabilities
        assert reference.shape == shape
        for runtime in LITERT:
            provenance = by_image[name][runtime].provenance.to_dict()
            assert provenance["conversion_input_shape"] == ["N", *shape, 3]
            assert by_image[name][runtime].probabilities.shape == shape
        effect = compare_maps(reference, by_image[name]["litert"].probabilities)
        assert effect.max_abs < 1e-6 and effect.max_ulp < 64  # float32: a few steps apart
        # Full int8 of a size is calibrated on the calibration images of that size only.
        int8 = by_image[name]["litert-int8"].provenance.to_dict()
        assert int8["calibration_hashes"] == calibration
        of_size = images[:2] if name == "cell_00.png" else [other]
        assert int8["conversion_calibrated_on"] == sorted(hash_path(path) for path in of_size)
        # Its weights are too small for LiteRT to quantize (< 1,024 elements): said, not hidden.
        dynamic = by_image[name]["litert-dynamic-int8"].provenance.to_dict()
        assert dynamic["compute_dtype"] == "float32 (nothing quantized)"
        assert dynamic["conversion_quantized_tensors"] == 0
        assert "quantized no tensor of this model" in dynamic["conversion_warnings"][0]
    # One artefact per runtime and size, each at the key of its recorded ingredients (the
    # store recomputes it on reading), the size among them.
    store = ConvertedStore(cache.root)
    stored = [store.read(path.stem) for path in _converted_files(cache)]
    assert len(stored) == 2 * len(LITERT)
    sizes = sorted(tuple(converted.ingredients["input_shape"]) for converted in stored)
    assert sizes == sorted([(72, 100, 3), (256, 256, 3)] * len(LITERT))
    # Asked again (another thread count: new runs), every size's artefact is reused.
    threads = ["runtime=litert,threads=1"]
    again = _run(model, targets, cache, threads, "--color", "rgb", "--sweep", capsys=capsys)
    assert all(run["status"] == "finished" for run in again)
    reused = [cache.read_run(run["key"]).provenance.to_dict() for run in again]
    assert all(provenance["conversion_reused"] for provenance in reused)
    assert len({provenance["conversion_key"] for provenance in reused}) == 2


def test_every_knob_it_runs_is_honoured(demo_runs):
    """The knob × runtime table's cells for LiteRT and ONNX Runtime, shown
    (tests/core/test_knob_cells.py)."""
    _, records = demo_runs
    how = assert_honoured(SPECS, records)
    assert len(how) >= 10, how
