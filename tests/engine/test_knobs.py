"""Each knob of a run configuration really takes effect, proven on the demo U-Net: by the
setting TensorFlow reports inside the child, and, where the CPU shows it, by the map itself."""

import json
import os
import shutil

import numpy as np
import pytest

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.protocol import RunFailed
from segdiff_gui.core.runtime_defaults import Machine, tensorflow_onednn_default
from segdiff_gui.runner import MatrixRunner, plan_matrix
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff
from tests.engine.knob_cells import assert_honoured

pytestmark = pytest.mark.slow

SPECS = {
    "base": "batch=1",
    "b4": "batch=4",
    "b64": "batch=64",
    "copies": "batch=4,context=copies",
    "position": "batch=4,position=2",
    "xla": "xla=on",
    "xla_off": "xla=off",
    "bf16": "precision=mixed_bfloat16",
    "fp16": "precision=mixed_float16",
    "keep": "precision=mixed_bfloat16,keep_float32=foreground",
    "tf32": "tf32=off",
    "threads": "threads=1",
    "onednn": "onednn=off",
    "onednn_on": "onednn=on",
    "determinism": "determinism=on",
    "emulated": "emulate=tf32",
}
FRESH_SPECS = ("batch=1", "batch=1,scope=fresh")


# The demo's matrix (tests/conftest.py ``demo_cache``, computed once for the whole run) holds
# these knobs' runs on the same images, two repeats each: the module starts from a copy of it,
# so they are cache hits here and threads=1 needs no child of its own.
FROM_DEMO = ("base", "b64", "xla", "bf16", "threads")


@pytest.fixture(scope="module")
def knobs_cache(demo_cache, tmp_path_factory):
    return ResultCache(shutil.copytree(demo_cache.root, tmp_path_factory.mktemp("knobs") / "c"))


@pytest.fixture(scope="module")
def runs(demo, knobs_cache):
    """Every knob once, twice each (repeats), on the demo's first image; records by name."""
    model, images = demo
    cache = knobs_cache
    configs = {name: parse_config_spec(spec) for name, spec in SPECS.items()}
    plan = plan_matrix(model, images, list(configs.values()), cache=cache, repeats=2)
    cached = {next(n for n, c in configs.items() if c == run.config) for run in plan.cached}
    assert cached == set(FROM_DEMO) and len(plan.cached) == 2 * len(FROM_DEMO)
    # default, oneDNN off, oneDNN on, determinism, TF32 off: own
    # processes; threads=1 ran in its own in the demo's matrix
    assert len(plan.jobs) == 5
    messages = list(MatrixRunner(plan, cache).run())
    assert messages[-1].failed == 0, messages
    by_config = {}
    for run in plan.runs:
        name = next(n for n, c in configs.items() if c == run.config)
        by_config[name, run.repeat] = cache.read_run(run.key)
    own = ("base", "threads", "onednn", "onednn_on", "determinism", "tf32")
    processes = {by_config[name, 0].provenance.to_dict()["process_id"] for name in own}
    assert len(processes) == len(own)  # each process-level setting in a child of its own
    return by_config


def differs(runs, name):
    return compare_maps(runs["base", 0].probabilities, runs[name, 0].probabilities)


def test_every_knob_it_runs_is_honoured(runs):
    """The knob × runtime table's cells for TensorFlow, shown
    (tests/core/test_knob_cells.py); a fresh process's repeat is shown by its process below."""
    how = assert_honoured(SPECS, {name: runs[name, 0] for name in SPECS})
    assert len(how) >= 14, how


def test_repeats_on_the_cpu_are_bitwise_equal(runs):
    assert differs(runs, "base").pixels == 256 * 256
    for name in SPECS:
        first, second = runs[name, 0], runs[name, 1]
        assert first.key != second.key
        assert first.probabilities.tobytes() == second.probabilities.tobytes(), name


def test_batch_size_reaches_the_model(runs):
    """Whether the batch moves the map is the CPU's kernels' to say (with oneDNN
    off, 336 pixels by up to 26 ULP on the CPU first measured and none on one with AVX-512
    BF16; with oneDNN on, about 41k by up to 113): the test asks only that the batch reached
    the model."""
    record = runs["b64", 0]
    assert record.provenance.to_dict()["input_batch_shape"] == [64, 256, 256, 1]
    assert record.raw_output_shape == [64, 256, 256, 1]
    assert record.batch_names[0] == "cell_00.png" and len(set(record.batch_names)) == 16


def test_batch_context_and_position(runs):
    assert runs["copies", 0].batch_names == ["cell_00.png"] * 4
    placed = runs["position", 0].batch_names
    assert placed[2] == "cell_00.png" and "cell_00.png" not in placed[:2] + placed[3:]
    assert runs["copies", 0].key != runs["position", 0].key


def test_xla_is_set_explicitly_and_changes_the_map(runs):
    assert runs["xla", 0].provenance.to_dict()["xla"] is True
    assert runs["base", 0].provenance.to_dict()["xla"] is False
    assert not differs(runs, "xla").bitwise_equal


def test_xla_left_at_its_default_is_model_predicts_choice_and_keyed(runs):
    """Not forced: on a machine where TensorFlow lists no GPU, Keras's
    jit_compile="auto" resolves to no XLA; the child reads it back and the key holds it."""
    base, off = runs["base", 0], runs["xla_off", 0]
    assert base.provenance.to_dict()["xla"] is False and "xla" not in base.config
    assert base.provenance.to_dict()["defaults_in_effect"]["xla"] is False
    assert differs(runs, "xla_off").bitwise_equal
    assert base.key != off.key and off.label == "cpu b1 xla-off r0"


def test_a_wrong_xla_prediction_fails_the_run_in_one_line(demo, tmp_path):
    """Told that TensorFlow sees a GPU here, the planner predicts XLA; the child's Keras
    says otherwise, and the run is refused rather than stored under a key it did not earn."""
    model, images = demo
    cache = ResultCache(tmp_path)
    plan = plan_matrix(
        model, images[:1], [RunConfig()], cache=cache, repeats=1,
        machine=Machine(tensorflow_accelerator=True),
    )  # fmt: skip
    assert plan.runs[0].in_effect.xla is True
    messages = list(MatrixRunner(plan, cache).run())
    failed = [m for m in messages if isinstance(m, RunFailed)]
    assert len(failed) == 1 and "\n" not in failed[0].error
    assert "model.predict compiles this model without XLA here" in failed[0].error
    assert not cache.has(plan.runs[0].key)


def test_precision_rebuilds_the_layers(runs):
    assert runs["base", 0].provenance.to_dict()["compute_dtype"] == "float32"
    assert runs["bf16", 0].provenance.to_dict()["compute_dtype"] == "bfloat16"
    assert runs["fp16", 0].provenance.to_dict()["compute_dtype"] == "float16"
    assert differs(runs, "bf16").max_abs > 1e-4
    assert differs(runs, "fp16").max_abs > 1e-6
    assert runs["bf16", 0].probabilities.dtype == np.float32


def test_tf32_switch_is_applied_and_leaves_cpu_maths_alone(runs):
    assert runs["base", 0].provenance.to_dict()["tf32_enabled"] is True
    assert runs["tf32", 0].provenance.to_dict()["tf32_enabled"] is False
    assert differs(runs, "tf32").bitwise_equal  # TF32 is a GPU tensor-core mode


def test_process_level_knobs_take_effect_in_their_own_child(runs):
    base = runs["base", 0].provenance.to_dict()
    assert (
        base["intra_op_threads"] == 0
        and runs["threads", 0].provenance.to_dict()["intra_op_threads"] == 1
    )
    assert runs["onednn", 0].provenance.to_dict()["onednn_enabled"] is False
    assert runs["onednn", 0].provenance.to_dict()["environment"]["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert runs["onednn_on", 0].provenance.to_dict()["onednn_enabled"] is True
    assert runs["onednn_on", 0].provenance.to_dict()["environment"]["TF_ENABLE_ONEDNN_OPTS"] == "1"
    assert base["op_determinism"] is False
    assert runs["determinism", 0].provenance.to_dict()["op_determinism"] is True


def test_onednn_left_at_its_default_is_tensorflows_own_choice_and_keyed(runs):
    """Not forced: the child leaves TF_ENABLE_ONEDNN_OPTS as the user's
    environment has it (set or not: README's test command runs with it either way), reads
    back what TensorFlow chose, and the key holds that value."""
    expected = tensorflow_onednn_default(os.environ)
    base = runs["base", 0]
    inherited = base.provenance.to_dict()["environment"].get("TF_ENABLE_ONEDNN_OPTS")
    assert inherited == os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    assert base.provenance.to_dict()["onednn_enabled"] is expected
    assert base.provenance.to_dict()["defaults_in_effect"] == {"onednn": expected, "xla": False}
    assert base.label == "cpu b1 r0" and "onednn" not in base.config
    # The default computes what the explicit setting of the same value computes.
    same, other = ("onednn_on", "onednn") if expected else ("onednn", "onednn_on")
    assert differs(runs, same).bitwise_equal
    assert base.key != runs[same, 0].key  # asked differently: its own entry
    assert runs[other, 0].provenance.to_dict()["onednn_enabled"] is not expected


def test_provenance_names_versions_device_and_host(runs):
    provenance = runs["base", 0].provenance.to_dict()
    for field in (
        "tf_version",
        "keras_version",
        "numpy_version",
        "h5py_version",
        "cuda_version",
        "cudnn_version",
        "cpu_model",
        "hostname",
        "timestamp",
        "segdiff_version",
        "wall_time_s",
    ):
        assert provenance[field] != "", field
    assert provenance["device"] == "cpu:0" and provenance["device_requested"] == "cpu"


def test_fresh_process_repeats_run_each_in_a_new_child_and_are_diagnosed(demo, runs, knobs_cache):
    """Beside the runs above (their in-process repeats served from the cache): only the
    fresh repeats are computed, each in a child of its own."""
    model, images = demo
    cache = knobs_cache
    result = segdiff(
        "run", model, *images, *(word for spec in FRESH_SPECS for word in ("--config", spec)),
        "--repeats", "2", "--cache", cache.root, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    statuses = {run["label"]: run["status"] for run in json.loads(result.stdout)["runs"]}
    assert statuses == {
        "cpu b1 r0": "cached", "cpu b1 r1": "cached",
        "cpu b1 fresh r0": "finished", "cpu b1 fresh r1": "finished",
    }  # fmt: skip
    records = [cache.read_run(run["key"]) for run in json.loads(result.stdout)["runs"]]
    processes = {r.label: r.provenance.to_dict()["process_id"] for r in records}
    assert processes["cpu b1 r0"] == processes["cpu b1 r1"]
    assert (
        len({processes["cpu b1 fresh r0"], processes["cpu b1 fresh r1"], processes["cpu b1 r0"]})
        == 3
    )
    assert len({r.key for r in records}) == 4
    diagnosis = segdiff("diagnose", "--cache", cache.root)
    assert diagnosis.returncode == 0, diagnosis.stderr
    assert "repeatable within a process (2 repeats) and across fresh processes" in " ".join(
        diagnosis.stdout.split()
    )
