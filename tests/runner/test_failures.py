"""A child that aborts, hangs, or asks for a missing GPU costs one run; cancel leaves no child.

The runner's part is tested with the fake engine (tests/fake_engine.py), whose faults are
asked for in its environment; what a real TensorFlow child does with a missing GPU and with
the user's variables is tested with real children (marked slow)."""

import threading
import time

import psutil
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.protocol import (
    AllDone,
    PlanReady,
    RunCached,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.core.runtime_defaults import tensorflow_onednn_default
from segdiff_gui.runner import MatrixRunner, plan_matrix

CONFIGS = [RunConfig(batch=1), RunConfig(batch=2), RunConfig(batch=3)]


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _new_children(before: set[int]) -> list[int]:
    return sorted(_children() - before)


def outcome(messages):
    finished = {m.label for m in messages if isinstance(m, RunFinished)}
    failed = {m.label: m for m in messages if isinstance(m, RunFailed)}
    return finished, failed


def test_an_aborting_child_fails_only_its_run(fake_engine, demo, small_images, cache):
    """The child dies computing cpu b2 r0, having stored cpu b1 r0 without yet saying so (a
    child writes a map while the next run computes): b1 is found stored, never computed
    again; b2, the last run started, fails; b3 runs in a fresh child."""
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_CRASH_ON": "cpu b2 r0"})
    messages = list(runner.run())
    finished, failed = outcome(messages)
    started = [m.label for m in messages if isinstance(m, RunStarted)]
    assert started.count("cpu b1 r0") == 1
    assert finished == {"cpu b1 r0", "cpu b3 r0"}
    assert set(failed) == {"cpu b2 r0"}
    assert "died from SIGABRT" in failed["cpu b2 r0"].error
    assert all(cache.has(run.key) for run in plan.runs if run.label in finished)
    assert isinstance(messages[-1], AllDone) and messages[-1].failed == 1


def test_a_child_killed_before_its_first_run_costs_no_run(
    fake_engine, demo, small_images, cache, tmp_path
):
    # Killed while loading the model: the old runner failed every run it had been given.
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    flag = tmp_path / "first-child-died"
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_DIE_AT_START": str(flag)})
    finished, failed = outcome(list(runner.run()))
    assert flag.exists()  # the first child did die
    assert finished == {"cpu b1 r0", "cpu b2 r0", "cpu b3 r0"} and not failed


def test_a_child_that_dies_at_start_every_time_fails_its_runs_once(
    fake_engine, demo, small_images, cache
):
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_DIE_AT_START": "/dev/null/x"})
    messages = list(runner.run())
    finished, failed = outcome(messages)
    assert not finished and set(failed) == {"cpu b1 r0", "cpu b2 r0", "cpu b3 r0"}
    assert "died from SIGKILL" in failed["cpu b1 r0"].error


def test_a_hanging_child_is_killed_after_the_timeout(fake_engine, demo, small_images, cache):
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache, timeout_s=3, child_env={"FAKE_ENGINE_HANG_ON": "cpu b1 r0"})
    finished, failed = outcome(list(runner.run()))
    assert finished == {"cpu b2 r0", "cpu b3 r0"}
    assert "no progress for 3 s (timed out; the child was killed)" in failed["cpu b1 r0"].error


@pytest.mark.slow
def test_a_missing_gpu_fails_clearly_without_falling_back(models, small_images, cache):
    plan = plan_matrix(
        models / "tiny.keras",
        small_images,
        [RunConfig(device="gpu:0"), RunConfig()],
        cache=cache,
        repeats=1,
    )
    finished, failed = outcome(list(MatrixRunner(plan, cache).run()))
    assert finished == {"cpu b1 r0"}
    assert failed["gpu:0 b1 r0"].error.startswith(
        "gpu:0 requested but TensorFlow sees no such device"
    )
    assert not any(cache.has(run.key) for run in plan.runs if run.config.is_gpu)


def test_cancel_kills_the_child_and_leaves_none(fake_engine, demo, small_images, cache):
    before = _children()  # another test's, in this worker, are not this one's
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_HANG_ON": "cpu b2 r0"})
    messages = []

    def consume():
        messages.extend(runner.run())

    consumer = threading.Thread(target=consume)
    consumer.start()
    deadline = time.monotonic() + 120
    while not any(isinstance(m, RunStarted) and m.label == "cpu b2 r0" for m in messages):
        assert time.monotonic() < deadline, messages
        time.sleep(0.1)
    child_pid = runner._child.process.pid
    runner.cancel()
    consumer.join(30)
    assert not consumer.is_alive()
    assert isinstance(messages[-1], AllDone) and messages[-1].cancelled
    assert (
        not psutil.pid_exists(child_pid)
        or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE
    )
    assert _new_children(before) == []


def test_second_plan_is_served_from_the_cache(fake_engine, demo, small_images, cache):
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=2)
    list(MatrixRunner(plan, cache).run())
    again = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=2)
    messages = list(MatrixRunner(again, cache).run())
    assert again.jobs == () and len(again.cached) == 6
    assert isinstance(messages[0], PlanReady) and messages[0].cached == 6
    assert sum(isinstance(m, RunCached) for m in messages) == 6


def test_a_child_dying_after_writing_keeps_its_finished_run(fake_engine, demo, small_images, cache):
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_CRASH_AFTER_WRITE": "cpu b2 r0"})
    finished, failed = outcome(list(runner.run()))
    assert finished == {"cpu b1 r0", "cpu b2 r0", "cpu b3 r0"} and failed == {}


def test_abandoning_the_generator_leaves_no_child(fake_engine, demo, small_images, cache):
    before = _children()  # another test's, in this worker, are not this one's
    plan = plan_matrix(demo[0], small_images, CONFIGS, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_HANG_ON": "cpu b2 r0"})
    messages = runner.run()
    for message in messages:
        if isinstance(message, RunStarted) and message.label == "cpu b2 r0":
            break
    child = runner._child.process
    messages.close()  # e.g. a GUI worker dropping the generator
    assert child.poll() is not None
    assert _new_children(before) == []


@pytest.mark.slow
def test_inherited_knob_variables_do_not_override_the_knobs(
    models, small_images, cache, monkeypatch
):
    """A set knob wins over the user's variable; oneDNN left at its default is the user's
    TF_ENABLE_ONEDNN_OPTS, as their own script would see it, and keyed by what it gives."""
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    plain = plan_matrix(models / "tiny.keras", small_images, [RunConfig()], cache=cache, repeats=1)
    users = "0" if tensorflow_onednn_default({}) else "1"  # the other way from this CPU's
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", users)
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "1")
    configs = [RunConfig(), RunConfig(onednn=users == "0")]
    plan = plan_matrix(models / "tiny.keras", small_images, configs, cache=cache, repeats=1)
    assert plan.runs[0].key != plain.runs[0].key  # another oneDNN in effect: another key
    messages = list(MatrixRunner(plan, cache).run())
    assert messages[-1].failed == 0, messages
    default, forced = (cache.read_run(run.key).provenance for run in plan.runs)
    assert default.onednn_enabled is (users == "1")
    assert default.environment["TF_ENABLE_ONEDNN_OPTS"] == users
    assert forced.onednn_enabled is (users == "0")  # the knob, not the variable
    assert "TF_NUM_INTRAOP_THREADS" not in default.environment
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    again = plan_matrix(models / "tiny.keras", small_images, [RunConfig()], cache=cache, repeats=1)
    assert again.runs[0].key != plan.runs[0].key  # passed-through numerics are in the key
    # cuDNN's algorithm choice too: keyed, and recorded so a stored key checks out.
    monkeypatch.setenv("TF_CUDNN_USE_AUTOTUNE", "0")
    tuned = plan_matrix(models / "tiny.keras", small_images, [RunConfig()], cache=cache, repeats=1)
    assert tuned.runs[0].key not in {again.runs[0].key, plan.runs[0].key}
    list(MatrixRunner(tuned, cache).run())
    stored = cache.read_run(tuned.runs[0].key)  # read back: its key recomputes from its record
    assert stored.provenance.environment["TF_CUDNN_USE_AUTOTUNE"] == "0"
