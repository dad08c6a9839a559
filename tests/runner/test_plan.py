"""Planning: shards, the engine command, what is decoded before any child starts, and what a
cache hit skips."""

import importlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.io.maps import open_maps
from segdiff_gui.runner import MatrixRequest, MatrixRunner, plan_matrix

planning = importlib.import_module(
    "segdiff_gui.runner.plan"
)  # the package exports a function of that name

CONFIGS = [RunConfig(batch=1), RunConfig(batch=2)]


@pytest.fixture
def decoded(monkeypatch):
    """The images planning decodes, in order (it still decodes them for real)."""
    paths = []
    real = planning.read_image

    def recording(path):
        paths.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(planning, "read_image", recording)
    return paths


@pytest.mark.slow
def test_a_bad_image_fails_at_planning_before_any_child(models, small_images, cache, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n but nothing else")
    # The run of batch 2 would read it beside the target.
    with pytest.raises(InputError, match="broken.png.*not a readable image"):
        plan_matrix(
            models / "tiny.keras", [small_images[0], broken], CONFIGS, cache=cache, repeats=1
        )
    with pytest.raises(InputError, match="broken.png.*not a readable image"):  # the target
        plan_matrix(models / "tiny.keras", [broken, *small_images], CONFIGS, cache=cache, repeats=1)


def test_a_tensor_no_model_can_take_is_refused_at_planning_before_any_child(demo, cache, tmp_path):
    """A .npy of floats is the model's input as it is: a float64 one, or one given with
    scaling, is refused by the child's own check whatever the model takes, so the planner
    says it before a child imports TensorFlow to say it (the target, or beside it in a
    batch); a float32 one passes (its size against the model's is the child's to check)."""
    model, images = demo
    wide, good = tmp_path / "wide.npy", tmp_path / "good.npy"
    np.save(wide, np.zeros((256, 256), np.float64))
    np.save(good, np.zeros((256, 256), np.float32))
    with pytest.raises(InputError, match=r"wide.npy.*is a float64 tensor"):
        plan_matrix(model, [wide], CONFIGS, cache=cache, repeats=1)
    with pytest.raises(InputError, match=r"wide.npy.*is a float64 tensor"):
        plan_matrix(model, [good, wide], [RunConfig(batch=2)], cache=cache, repeats=1)
    with pytest.raises(InputError, match=r"good.npy.*it takes no divide"):
        plan_matrix(
            model, [good], CONFIGS, cache=cache, repeats=1,
            preprocessing=Preprocessing(divisor=255.0),
        )  # fmt: skip
    assert len(plan_matrix(model, [good, images[0]], CONFIGS, cache=cache, repeats=1).jobs) == 1


def test_a_cache_hit_decodes_only_the_images_of_runs_to_compute(
    models, small_images, cache, tmp_path, decoded, fake_engine
):
    # Planning's work: the fake engine writes the first runs (real children fill the cache
    # as the runner asks in tests/engine/, e.g. test_runtimes.py's cache hits).
    model = models / "tiny.keras"
    first = plan_matrix(model, small_images[:2], CONFIGS, cache=cache, repeats=1)
    assert sorted(decoded) == ["small_0.png", "small_1.png"]  # nothing cached yet: all of them
    list(MatrixRunner(first, cache).run())
    decoded.clear()
    again = plan_matrix(model, small_images[:2], CONFIGS, cache=cache, repeats=1)
    assert again.jobs == () and decoded == []  # every run cached: no child reads an image
    # A changed file under an old name makes new keys (its bytes are new): the run of batch 2,
    # which reads it and small_0, is to compute, and both are decoded first. small_3 is in no
    # run's batch: nothing reads it.
    changed = tmp_path / "small_1.png"
    shutil.copy(small_images[2], changed)
    plan = plan_matrix(
        model, [small_images[0], changed, small_images[3]], CONFIGS, cache=cache, repeats=1
    )
    assert [run.label for job in plan.jobs for run in job.runs] == ["cpu b2 r0"]
    assert decoded == ["small_0.png", "small_1.png"]


def test_shards_split_the_set_into_disjoint_near_equal_slices() -> None:
    from segdiff_gui.core.shards import shard_slice

    for count in (0, 1, 5, 16, 17):
        for total in (1, 2, 3, 8, 20):
            slices = [list(shard_slice(count, (k, total))) for k in range(1, total + 1)]
            flat = [i for part in slices for i in part]
            assert flat == list(range(count))  # in order, each image exactly once
            sizes = [len(part) for part in slices]
            assert max(sizes) - min(sizes) <= 1


def test_a_frozen_app_starts_its_engine_through_itself(monkeypatch) -> None:
    import sys

    from segdiff_gui.runner.child import ENGINE_FLAG, engine_command

    assert engine_command("run") == [sys.executable, "-P", "-m", "segdiff_gui.engine", "run"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/segdiff/segdiff-gui")
    assert engine_command("probe") == ["/opt/segdiff/segdiff-gui", ENGINE_FLAG, "probe"]


def test_a_runtime_not_installed_is_said_at_planning_with_its_extra(demo, cache, monkeypatch):
    from segdiff_gui.core.runtimes import Runtime

    model, images = demo
    monkeypatch.setattr(Runtime, "installed", lambda runtime: runtime.name != "jax")
    jax = [RunConfig(runtime="jax")]
    with pytest.raises(InputError, match=r"JAX is not installed.*segdiff\[jax\]"):
        plan_matrix(model, images[:1], jax, cache=cache, repeats=1)
    # Runs of the other runtimes plan as ever.
    assert len(plan_matrix(model, images[:1], CONFIGS, cache=cache, repeats=1).jobs) == 1


def test_fresh_repeats_each_get_a_child_of_their_own(demo, cache):
    model, images = demo
    configs = [RunConfig(), RunConfig(repeat_scope="fresh"), RunConfig(batch=2)]
    plan = plan_matrix(model, images[:2], configs, cache=cache, repeats=3)
    sizes = sorted(len(job.runs) for job in plan.jobs)
    assert sizes == [1, 1, 1, 6]  # in-process repeats share a child; fresh ones never
    fresh = [run for run in plan.runs if run.config.fresh_repeats]
    assert len({run.key for run in fresh}) == 3
    # Their own keys: a fresh-process repeat is not the in-process one.
    plain = {run.key for run in plan.runs if run.config == RunConfig()}
    assert not plain & {run.key for run in fresh}


def test_session_options_of_a_converted_runtime_share_its_child_with_a_session_each(demo, cache):
    """LiteRT's thread count and ONNX Runtime's thread count and determinism are options of
    the interpreter or session the child opens per run, not of the process: the runs that
    differ only in them share one child (one TensorFlow import, one conversion), and each is
    its own forward key, so that no run is computed on another's session. TensorFlow's and
    the other knobs of these runtimes still split children."""
    model, images = demo
    configs = [
        RunConfig(runtime="litert"), RunConfig(runtime="litert", threads=1),
        RunConfig(runtime="litert-int8", threads=2),
        RunConfig(runtime="onnxruntime"), RunConfig(runtime="onnxruntime", threads=1),
        RunConfig(runtime="onnxruntime", determinism=True),
        RunConfig(), RunConfig(threads=1), RunConfig(determinism=True),
    ]  # fmt: skip
    plan = plan_matrix(model, images[:1], configs, cache=cache, repeats=1)
    children = sorted(
        (job.runs[0].config.runtime, len(job.runs)) for job in plan.jobs
    )  # fmt: skip
    assert children == [
        ("litert", 3), ("onnxruntime", 3),
        ("tensorflow", 1), ("tensorflow", 1), ("tensorflow", 1),
    ]  # fmt: skip
    for job in plan.jobs:
        keys = [run.config.forward_key() for run in job.runs]
        assert len(set(keys)) == len(keys), keys


LITERT = ("litert", "litert-fp16", "litert-dynamic-int8", "litert-int8")


def test_litert_conversions_share_one_child_and_other_runtimes_keep_their_own(demo, cache):
    """LiteRT's four conversions are one engine module under one pre-import environment: their
    runs share a child (one TensorFlow import converts all four) where their other
    process-level knobs agree, each its own forward key (its own conversion and session) and
    its own key, label and configuration. ONNX Runtime and TensorFlow keep children of their
    own, and a process-level knob LiteRT reads once still splits its conversions."""
    model, images = demo
    configs = [
        *(RunConfig(runtime=name) for name in LITERT),
        RunConfig(runtime="litert-fp16", batch=2),
        RunConfig(runtime="litert-int8", repeat_scope="fresh"),
        RunConfig(runtime="onnxruntime"), RunConfig(),
    ]  # fmt: skip
    plan = plan_matrix(model, images[:2], configs, cache=cache, repeats=1)
    jobs = sorted(
        (sorted({run.config.runtime for run in job.runs}), len(job.runs)) for job in plan.jobs
    )
    assert jobs == [
        (["litert", "litert-dynamic-int8", "litert-fp16", "litert-int8"], 5),
        (["litert-int8"], 1),  # a repeat in a fresh process is alone in its child
        (["onnxruntime"], 1),
        (["tensorflow"], 1),
    ]
    (shared,) = (job for job in plan.jobs if len(job.runs) == 5)
    assert shared.process_config() in {run.config for run in shared.runs}
    # A forward pass (a session on its conversion) per runtime: batch 2 reuses float16's.
    keys = {run.config.forward_key() for run in shared.runs}
    assert sorted(dict(key)["runtime"] for key in keys) == sorted(LITERT)
    # Each run keeps the key and label it has planned alone in a child of its own.
    for run in shared.runs:
        alone = plan_matrix(model, images[:2], [run.config], cache=cache, repeats=1)
        (same,) = alone.runs
        assert (same.key, same.label, same.config) == (run.key, run.label, run.config)


def test_a_full_int8_runs_key_holds_its_calibration_images_and_no_other_runs_does(
    models, small_images, cache
):
    """Full int8 is calibrated on the set's images: another set is another model (another
    key); every other runtime's key ignores the set beyond the run's own batch."""
    configs = [RunConfig(runtime="litert"), RunConfig(runtime="litert-int8")]

    def keys(images):
        plan = plan_matrix(models / "tiny.keras", images, configs, cache=cache, repeats=1)
        return {run.config.runtime: run.key for run in plan.runs}

    whole, fewer = keys(small_images), keys(small_images[:2])
    assert whole["litert"] == fewer["litert"]
    assert whole["litert-int8"] != fewer["litert-int8"]
    # The set's order is not part of it (the target stays first, so the run is the same).
    reordered = [small_images[0], *reversed(small_images[1:])]
    assert keys(reordered)["litert-int8"] == whole["litert-int8"]


def test_lying_headers_are_refused_from_the_headers_before_any_image_is_decoded(
    demo, cache, tmp_path, monkeypatch, decoded
):
    """Eight 4 KB PNGs whose headers claim 16384² RGBA. Batch 64 holds all
    eight: 5 GiB each (decoded, and as float32 input), over a 12 GiB bound at the third."""
    from tests.factories import lying_png

    model, _ = demo
    images = [lying_png(tmp_path / f"lie{index}.png") for index in range(8)]
    monkeypatch.setenv("SEGDIFF_MAX_IMAGE_MEMORY", str(12 << 30))
    configs = [RunConfig(batch=1), RunConfig(batch=64)]
    refused = r"lie2\.png: held in one batch with the 2 images before it, they would take 15\.0"
    with pytest.raises(InputError, match=rf"{refused} GiB, over segdiff's bound of 12\.0 GiB"):
        plan_matrix(model, images, configs, cache=cache, repeats=1)
    assert decoded == [] and not (cache.root / "images").exists()


def test_import_and_reproduce_refuse_a_lying_header_before_decoding_it(
    demo, cache, tmp_path, monkeypatch
):
    """Beyond planning: ``segdiff import`` decoded every image and
    ``reproduce`` its target before any bound was checked."""
    from segdiff_gui.runner import imports, reproduce
    from tests.factories import lying_png

    model, _ = demo
    lie = lying_png(tmp_path / "lie.png")
    np.save(tmp_path / "map.npy", np.zeros((16384, 16384), np.float32)[:1, :1])
    decoded: list[str] = []

    def recording(path):
        decoded.append(Path(path).name)
        raise AssertionError("decoded")

    monkeypatch.setattr(imports, "read_image", recording)
    monkeypatch.setattr(reproduce, "read_image", recording)
    monkeypatch.setenv("SEGDIFF_MAX_IMAGE_MEMORY", str(1 << 30))
    refused = r"lie\.png: decoded, with its float32 model input, it would take 5\.0 GiB, over"
    request = imports.ImportRequest(tmp_path / "map.npy", model, (lie,), cache)
    with pytest.raises(InputError, match=refused):
        imports.import_maps(request, inspect=lambda *_a, **_k: pytest.fail("inspected"))
    maps = open_maps(tmp_path / "map.npy")
    search = reproduce.ReproduceSearch(maps, MatrixRequest(model, (lie,), cache))
    with pytest.raises(InputError, match=refused):
        search.plan()
    assert decoded == []
