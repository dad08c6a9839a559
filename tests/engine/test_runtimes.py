"""The same model under Keras 3's JAX and PyTorch backends, on the CPU, through the real
command line: each runtime runs in its own child, every knob takes effect there (read back
from the runtime inside the child) or is refused with one line, and ``segdiff compare`` shows
how far each runtime is from TensorFlow."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.core import runtime_defaults
from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.protocol import RunFailed
from segdiff_gui.runner import MatrixRunner, plan_matrix
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff, segdiff_here
from tests.engine.demo_runs import RUNTIMES, module_runs
from tests.engine.knob_cells import assert_honoured

pytestmark = pytest.mark.slow

SPECS = RUNTIMES  # tests/engine/demo_runs.py: computed there with the exact and TF32 runs


@pytest.fixture(scope="module")
def runs(demo_runtime_runs, tmp_path_factory):
    """Every spec's run on the demo's first four images, by the real ``segdiff run``
    (tests/engine/demo_runs.py: with test_exact.py's and test_tf32_emulation.py's, one child
    per runtime's process-level settings for all three), in a cache of this module's runs."""
    root = tmp_path_factory.mktemp("runtimes") / "cache"
    cache, entries = module_runs(demo_runtime_runs, root, SPECS)
    assert all(entry["status"] == "finished" for entry in entries.values()), entries
    return cache, {name: cache.read_run(entry["key"]) for name, entry in entries.items()}


def test_each_runtime_runs_the_demo_on_the_cpu_with_its_weights_there(runs):
    _, records = runs
    for name, record in records.items():
        runtime = name.split()[0].replace("tf", "tensorflow")
        assert record.provenance.to_dict()["runtime"] == runtime, name
        assert record.provenance.to_dict()["keras_backend"] == runtime, name
        assert record.provenance.to_dict()["device"] == "cpu:0", name
        assert record.provenance.to_dict()["weights_device"] == "cpu:0", name
    # TensorFlow's keys and labels are what they were before runtimes existed.
    assert records["tf"].label == "cpu b1 r0" and "runtime" not in records["tf"].config
    assert records["jax"].label == "jax cpu b1 r0"
    assert records["jax"].provenance.to_dict()["jaxlib_version"]
    assert records["torch"].provenance.to_dict()["torch_version"]
    assert records["openvino"].provenance.to_dict()["openvino_build"]
    assert records["openvino b4"].provenance.to_dict()["input_batch_shape"] == [4, 256, 256, 1]


def test_a_cpu_only_child_opens_no_gpu_in_any_runtime(runs):
    """As far as a machine without a GPU shows it: a CPU-only
    TensorFlow child makes no GPU visible, a JAX child is limited to the CPU platform and
    never preallocates (the runs above are such children: tests/engine/test_gpu_path.py
    shows the rest of the GPU path)."""
    _, records = runs
    assert records["tf"].provenance.to_dict()["visible_gpus"] == []
    for name in ("jax", "jax knobs"):
        provenance = records[name].provenance.to_dict()
        assert provenance["jax_platforms"] == ["cpu"], name
        assert provenance["environment"]["JAX_PLATFORMS"] == "cpu", name
        assert provenance["environment"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false", name


def test_runtimes_differ_from_tensorflow_by_a_few_hundred_ulp_at_most(runs):
    """In float32: OpenVINO asked for f32 (left to itself, it infers in bf16 on a CPU with
    AVX-512 BF16 or AMX: see the tests below)."""
    _, records = runs
    reference = records["tf"].probabilities
    for name in ("jax", "torch", "openvino f32"):
        other = records[name].probabilities
        assert other.tobytes() != reference.tobytes(), name
        ulp = np.abs(reference.view(np.int32).astype(np.int64) - other.view(np.int32))
        assert 0 < ulp.max() < 1000, name


# OpenVINO asked for each inference precision, beside its default (test_knob_cells.py reads
# these): bf16 is computed here, apart from the shared runs, since a CPU that cannot refuses it.
HINTS = {
    "openvino": "runtime=openvino",
    "openvino f32": "runtime=openvino,inference_precision=f32",
    "openvino bf16": "runtime=openvino,inference_precision=bf16",
}


@pytest.fixture(scope="module")
def openvino_precisions(runs, demo4, tmp_path_factory):
    """What OpenVINO's CPU plugin reports, asked by a child of its own with no hint, f32 and
    bf16; and :data:`HINTS` run by the real ``segdiff run`` in a copy of the module's cache
    (the default and f32 served from it, bf16 computed): its JSON entries by name, and the
    cache."""
    said = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("openvino_precision_child.py"))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert said.returncode == 0, said.stderr[-3000:]
    cache = ResultCache(shutil.copytree(runs[0].root, tmp_path_factory.mktemp("hints") / "c"))
    model, images = demo4
    configs = [word for spec in HINTS.values() for word in ("--config", spec)]
    result = segdiff(
        "run", model, *images, *configs, "--repeats", "1", "--cache", cache.root, "--json"
    )
    entries = dict(zip(HINTS, json.loads(result.stdout)["runs"], strict=True))
    return json.loads(said.stdout), entries, cache


def test_openvino_records_the_precision_its_compiled_model_reports(openvino_precisions):
    """Left at its default, OpenVINO infers in what its CPU plugin chooses for this
    CPU (bf16 where it has AVX-512 BF16 or AMX): the run records what the compiled model
    reports, predicted and keyed before the child started; asked for f32 or bf16, it records
    what it computed in, and bf16 where the CPU cannot is refused in one line. Whatever the CPU,
    the default's map is the map of the precision it reports, bit for bit."""
    reported, entries, cache = openvino_precisions
    assert entries["openvino"]["status"] == entries["openvino f32"]["status"] == "cached"
    records = {
        name: cache.read_run(entry["key"])
        for name, entry in entries.items()
        if entry["status"] != "failed"
    }
    default = records["openvino"].provenance
    assert default.inference_precision == reported["default"]
    assert default.defaults_in_effect.inference_precision == reported["default"]
    assert (
        f"inference precision {reported['default']}: OpenVINO's default on this CPU"
        in default.in_effect_lines(records["openvino"].run_config)
    )
    assert records["openvino"].label == f"openvino cpu b1 {reported['default']} r0"
    assert entries["openvino"]["label"] == records["openvino"].label  # as planned
    assert records["openvino f32"].provenance.inference_precision == reported["f32"] == "f32"
    assert records["openvino f32"].label == "openvino cpu b1 infer-f32 r0"
    if reported["bf16"] == "bf16":
        assert entries["openvino bf16"]["status"] == "finished", entries["openvino bf16"]
        assert records["openvino bf16"].provenance.inference_precision == "bf16"
    else:  # a CPU without bfloat16: OpenVINO would have computed in f32 without a word
        assert entries["openvino bf16"]["status"] == "failed"
        assert entries["openvino bf16"]["error"].startswith(
            f"inference_precision=bf16: OpenVINO's CPU plugin computes this model in "
            f"{reported['bf16']} on this CPU"
        ), entries["openvino bf16"]
    if (asked := f"openvino {reported['default']}") in records:  # not an ARM CPU's f16
        same = records[asked].probabilities
        assert records["openvino"].probabilities.tobytes() == same.tobytes()


def test_a_wrong_inference_precision_prediction_fails_the_run_in_one_line(
    demo, tmp_path, monkeypatch
):
    """Told the CPU plugin will choose the other precision, the planner keys the run so; the
    child's compiled model says otherwise, and the run is refused rather than stored under a
    key it did not earn (the prediction itself is checked above)."""
    right = runtime_defaults.openvino_precision_default()
    wrong = "bf16" if right == "f32" else "f32"
    monkeypatch.setattr(runtime_defaults, "openvino_precision_default", lambda: wrong)
    model, images = demo
    cache = ResultCache(tmp_path)
    plan = plan_matrix(model, images[:1], [RunConfig(runtime="openvino")], cache=cache, repeats=1)
    assert plan.runs[0].in_effect.inference_precision == wrong
    messages = list(MatrixRunner(plan, cache).run())
    failed = [m for m in messages if isinstance(m, RunFailed)]
    assert len(failed) == 1 and "\n" not in failed[0].error
    assert failed[0].error.startswith(
        f"OpenVINO's CPU plugin infers in {right} by default here, but segdiff "
        f"expected {wrong} on this CPU; set it explicitly"
    ), failed[0].error
    assert not cache.has(plan.runs[0].key)


def test_openvino_in_bf16_is_far_from_tensorflow_and_in_f32_near_it(openvino_precisions, runs):
    """What docs/runtimes.md says per CPU: f32 within a few hundred ULP of TensorFlow's map,
    bf16 (where the CPU computes it) thousands of times further."""
    reported, entries, cache = openvino_precisions
    if reported["bf16"] != "bf16":
        pytest.skip("this CPU has no bfloat16 for OpenVINO (the refusal is tested above)")
    tensorflow = runs[1]["tf"].probabilities
    far = compare_maps(tensorflow, cache.read_run(entries["openvino bf16"]["key"]).probabilities)
    near = compare_maps(tensorflow, runs[1]["openvino f32"].probabilities)
    assert near.max_ulp < 1000 and far.max_abs > 1000 * near.max_abs, (near, far)


def test_xla_precision_and_batch_take_effect_under_jax_and_torch(runs):
    _, records = runs
    assert records["jax xla"].provenance.to_dict()["placement"] == (
        "one XLA computation (jax.jit, 1 compiled) on cpu"
    )
    assert records["jax eager"].provenance.to_dict()["placement"].startswith("op by op")
    # Left at its default, XLA is what Keras's model.predict does under JAX: one jax.jit.
    default = records["jax"].provenance.to_dict()
    assert default["placement"].startswith("one XLA computation") and default["xla"] is True
    assert default["defaults_in_effect"] == {"xla": True}
    assert records["jax"].probabilities.tobytes() == records["jax xla"].probabilities.tobytes()
    for name in ("jax bf16", "torch bf16"):
        assert records[name].provenance.to_dict()["compute_dtype"] == "bfloat16", name
        plain = records[name.split()[0]].probabilities
        assert records[name].probabilities.tobytes() != plain.tobytes(), name
    for name in ("jax b4", "torch b4"):
        assert records[name].provenance.to_dict()["input_batch_shape"] == [4, 256, 256, 1], name


def test_process_level_knobs_are_read_back_from_each_runtime(runs):
    _, records = runs
    base, knobs = records["jax"].provenance.to_dict(), records["jax knobs"].provenance.to_dict()
    assert (base["matmul_precision"], knobs["matmul_precision"]) == ("default", "highest")
    assert (base["tf32_enabled"], knobs["tf32_enabled"]) == (True, False)
    assert (base["intra_op_threads"], knobs["intra_op_threads"]) == (0, 1)
    assert (base["op_determinism"], knobs["op_determinism"]) == (False, True)
    assert "--xla_gpu_deterministic_ops=true" in knobs["xla_flags"]
    base, knobs = records["torch"].provenance.to_dict(), records["torch knobs"].provenance.to_dict()
    assert (base["tf32_enabled"], knobs["tf32_enabled"]) == (True, False)
    assert knobs["intra_op_threads"] == 1 and base["intra_op_threads"] != 1
    assert (base["op_determinism"], knobs["op_determinism"]) == (False, True)
    assert (base["onednn_enabled"], knobs["onednn_enabled"]) == (True, False)
    # oneDNN off takes PyTorch's convolutions to other kernels: the map moves.
    torch_maps = records["torch"].probabilities, records["torch knobs"].probabilities
    assert torch_maps[0].tobytes() != torch_maps[1].tobytes()


def test_compare_shows_every_runtime_against_tensorflow(runs, capsys):
    cache, _ = runs
    result = segdiff_here(capsys, "compare", "--cache", cache.root, "--json")
    assert result.returncode == 0, result.stderr
    (study,) = json.loads(result.stdout)
    assert study["reference"] == "cpu b1 r0"
    rows = {row["label"]: row for row in study["comparisons"]}
    assert not rows["jax cpu b1 r0"]["bitwise_equal"]
    assert 0 < rows["torch cpu b1 r0"]["max_ulp"] < 1000
    again = segdiff_here(capsys, "compare", "--cache", cache.root, "--ref", "jax cpu b1")
    assert again.returncode == 0 and "torch cpu b1 r0" in again.stdout


def test_runs_of_other_runtimes_are_served_from_the_cache(runs, demo4, capsys):
    cache, _ = runs
    model, images = demo4
    configs = [arg for spec in SPECS.values() for arg in ("--config", spec)]
    result = segdiff_here(
        capsys, "run", model, *images, *configs, "--repeats", "1", "--cache", cache.root,
        "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert {run["status"] for run in json.loads(result.stdout)["runs"]} == {"cached"}


def test_a_savedmodel_under_jax_is_skipped_in_one_line_and_refused_alone(
    models, small_images, cache, capsys
):
    """JAX beside TensorFlow: the JAX configuration is said skipped in one line, before any
    child, and TensorFlow's runs; asked alone, it is refused in that line."""
    common = (small_images[0], "--repeats", "1", "--trust-model", "--cache", cache.root)
    alone = segdiff_here(
        capsys, "run", models / "tiny_savedmodel", *common, "--config", "runtime=jax"
    )
    assert alone.returncode == 2
    assert "runs only under TensorFlow, not jax" in alone.stderr
    assert len(alone.stderr.strip().splitlines()) == 1 and cache.keys() == []
    both = segdiff_here(
        capsys, "run", models / "tiny_savedmodel", *common, "--config", "batch=1",
        "--config", "runtime=jax",
    )  # fmt: skip
    assert both.returncode == 0, both.stderr
    skipped = [line for line in both.stderr.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and "runs only under TensorFlow, not jax" in skipped[0]
    assert len(cache.keys()) == 1


@pytest.mark.parametrize(
    "spec, said",
    [
        ("runtime=torch,xla=on", "xla=on means nothing under PyTorch"),
        ("runtime=jax,onednn=off", "onednn=off means nothing under JAX"),
    ],
)
def test_knobs_a_runtime_cannot_take_are_refused_before_any_child(demo, cache, capsys, spec, said):
    model, images = demo
    result = segdiff_here(capsys, "run", model, images[0], "--config", spec, "--cache", cache.root)
    assert result.returncode == 2
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def overflow(models, small_images, tmp_path_factory):
    """The overflowing model under TensorFlow and JAX, float32 and float16 (two children),
    with JAX's compilation cache in a folder any user can write to: what the command said,
    the runs by label, the cache and that folder."""
    base = tmp_path_factory.mktemp("overflow")
    shared = base / "shared"
    (shared / "compiled" / "jax").mkdir(parents=True)
    os.chmod(shared / "compiled" / "jax", 0o777)
    cache = ResultCache(base / "cache")
    result = segdiff(
        "run", models / "overflow16.keras", small_images[0], "--config", "batch=1",
        "--config", "precision=fp16", "--config", "runtime=jax",
        "--config", "runtime=jax,precision=fp16", "--repeats", "1", "--cache", cache.root,
        "--json", env={"SEGDIFF_COMPILATION_CACHE": str(shared)},
    )  # fmt: skip
    runs = {run["label"]: run for run in json.loads(result.stdout)["runs"]}
    return result, runs, cache, shared


def test_nan_outputs_are_the_runtimes_failure_and_never_cached(overflow):
    """A precision that overflows gives NaN maps: said as what they are, for each runtime,
    and not stored as results (the float32 runs beside them are)."""
    result, runs, cache, _ = overflow
    assert result.returncode == 1, result.stderr
    for label in ("cpu b1 r0", "jax cpu b1 r0"):
        assert runs[label]["status"] == "finished", runs[label]
    for label, runtime in (("cpu b1 fp16 r0", "tensorflow"), ("jax cpu b1 fp16 r0", "jax")):
        assert runs[label]["status"] == "failed"
        assert runs[label]["error"].startswith(
            f"{runtime} produced NaN in 100 % of the target's output"
        ), runs[label]["error"]
    assert sorted(cache.keys()) == sorted(
        runs[label]["key"] for label in runs if "fp16" not in label
    )


def test_a_compilation_cache_others_can_write_to_is_not_used_and_said(overflow):
    """A compiled executable runs as it is, so JAX's cache in a folder that
    any user can write to is refused in one line before the run, and the run compiles afresh
    (its provenance says why)."""
    result, runs, cache, shared = overflow
    said = [line for line in result.stderr.splitlines() if "compilation cache" in line]
    assert said == [
        f"segdiff: JAX's compilation cache is not used: {shared / 'compiled' / 'jax'} can be "
        "written by other users (mode 777); the model is compiled afresh"
    ]
    run = runs["jax cpu b1 r0"]
    assert run["status"] == "finished", run
    provenance = cache.read_run(run["key"]).provenance.to_dict()
    assert provenance["compilation_cache"] == ""
    assert "can be written by other users" in provenance["compilation_cache_refused"]
    assert not any((shared / "compiled" / "jax").iterdir())  # nothing written there either


@pytest.mark.parametrize(
    "spec, said",
    [
        ("runtime=openvino,precision=bf16", "precision=mixed_bfloat16 means nothing under OpenV"),
        ("runtime=openvino,device=gpu:0", "gpu:0 cannot run OpenVINO here"),
        ("runtime=openvino,xla=on", "xla=on means nothing under OpenVINO: OpenVINO compiles"),
    ],
)
def test_knobs_openvino_does_not_take_are_refused_in_one_line(demo, cache, capsys, spec, said):
    """A runtime added as one entry and one module (core/runtimes.py, and
    engine/backends/openvino.py) refuses what it does not take, before any child."""
    model, images = demo
    result = segdiff_here(capsys, "run", model, images[0], "--config", spec, "--cache", cache.root)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_every_knob_it_runs_is_honoured(runs):
    """The knob × runtime table's cells for JAX, PyTorch and OpenVINO, shown
    (tests/core/test_knob_cells.py)."""
    _, records = runs
    how = assert_honoured(SPECS, records)
    assert len(how) >= 20, how
