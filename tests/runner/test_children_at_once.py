"""A second group's child computes while the first is busy, never two on one GPU,
and the first child of default settings says what the model and the machine are, so that a
fresh cache needs no inspection or probe child."""

import os
import threading
import time

import psutil
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.protocol import AllDone, ChildFatal, ModelAnswer, RunFailed, RunFinished
from segdiff_gui.runner import MatrixRunner, plan_matrix
from segdiff_gui.runner import devices as devices_module
from segdiff_gui.runner.devices import inspect_model, no_gpu_possible, remembered_probe
from segdiff_gui.runner.matrix import _next_job
from segdiff_gui.runner.request import MatrixRequest


def _no_child(*args, **kwargs):
    raise AssertionError(f"a TensorFlow child was started: {args[:1]}")


def test_jobs_that_share_a_gpu_never_run_at_once(demo, small_images, cache):
    configs = [RunConfig(device="gpu:0"), RunConfig(device="gpu:0", threads=1),
               RunConfig(threads=1), RunConfig(device="gpu:1", determinism=True)]  # fmt: skip
    plan = plan_matrix(demo[0], small_images, configs, cache=cache, repeats=1)
    jobs = dict(enumerate(plan.jobs))
    devices = {index: {run.config.device for run in job.runs} for index, job in jobs.items()}
    on_gpu0 = next(i for i, used in devices.items() if used == {"gpu:0"})
    running = {on_gpu0: jobs.pop(on_gpu0)}
    chosen = _next_job(jobs, running, limit=2)
    assert chosen is not None and "gpu:0" not in devices[chosen]
    assert _next_job(jobs, running, limit=1) is None  # one child at a time when told so


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: one child at a time")
def test_a_second_group_computes_while_the_first_child_hangs(
    fake_engine, demo, small_images, cache
):
    # threads=1 is a process-level knob: its run has a child of its own. The default group's
    # second run hangs; run one after the other, the threads=1 run would never start.
    other = RunConfig(threads=1)
    configs = [RunConfig(batch=1), RunConfig(batch=2), other]
    plan = plan_matrix(demo[0], small_images, configs, cache=cache, repeats=1)
    assert len(plan.jobs) == 2
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_HANG_ON": "cpu b2 r0"})
    # Children another test of this worker left (a window's inspection, say) are not ours.
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    messages = []
    consumer = threading.Thread(target=lambda: messages.extend(runner.run()), daemon=True)
    consumer.start()
    try:
        deadline = time.monotonic() + 180
        finished: set[str] = set()
        expected = {"cpu b1 r0", f"{other.label()} r0"}  # the other group's child starts early
        while not expected <= finished:
            assert time.monotonic() < deadline, messages
            time.sleep(0.1)
            finished = {m.label for m in list(messages) if isinstance(m, RunFinished)}
        assert finished == expected
    finally:
        runner.cancel()  # the hung child too, whatever was asserted
        consumer.join(30)
    assert not consumer.is_alive()
    assert isinstance(messages[-1], AllDone) and messages[-1].cancelled
    assert [c for c in psutil.Process().children(recursive=True) if c.pid not in before] == []


@pytest.mark.slow
def test_the_run_child_answers_for_the_model_and_the_devices(
    models, small_images, cache, monkeypatch
):
    plan = plan_matrix(models / "tiny.keras", small_images, [RunConfig()], cache=cache, repeats=1)
    messages = list(MatrixRunner(plan, cache).run())
    said = [m for m in messages if isinstance(m, ModelAnswer)]
    assert len(said) == 1 and said[0].input_shape == [32, 32, 1]
    probe = remembered_probe(cache.root)
    assert probe is not None and "cpu" in [d["name"] for d in probe["devices"]]
    assert probe["facts"]["runtime_version"].startswith("2.")
    monkeypatch.setattr(devices_module, "ask_child", _no_child)
    answer = inspect_model(plan.model_path, state_dir=cache.root, model_hash=plan.model_hash)
    assert answer == said[0]


@pytest.mark.skipif(not no_gpu_possible(), reason="this machine has GPU device files")
def test_a_default_matrix_on_a_machine_without_gpus_asks_no_child(
    demo, small_images, cache, monkeypatch
):
    monkeypatch.setattr(devices_module, "ask_child", _no_child)
    runner = MatrixRequest(demo[0], tuple(small_images), cache).start()
    assert {run.config.device for run in runner.plan.runs} == {"cpu"}


def _recording_starts(runner: MatrixRunner) -> list[tuple[bool, int]]:
    """Every child ``runner`` starts, as (started early, its CPU priority just after)."""
    started: list[tuple[bool, int]] = []
    real_start = runner._start

    def start(job, early=False):  # type: ignore[no-untyped-def]
        child = real_start(job, early)
        try:
            started.append((early, psutil.Process(child.process.pid).nice()))
        except psutil.NoSuchProcess:  # it was killed already
            started.append((early, -1))
        return child

    runner._start = start  # type: ignore[method-assign]
    return started


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: one child at a time")
def test_the_second_child_starts_beside_the_first_at_a_lower_priority(
    fake_engine, demo, small_images, cache
):
    # The default group's first run hangs: its child never ends a run. The threads=1 group's
    # child started beside it all the same, at once and niced, and computes its run.
    other = RunConfig(threads=1)
    plan = plan_matrix(demo[0], small_images, [RunConfig(), other], cache=cache,
                       repeats=1)  # fmt: skip
    runner = MatrixRunner(plan, cache, child_env={"FAKE_ENGINE_HANG_ON": "cpu b1 r0"})
    started = _recording_starts(runner)
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    messages: list = []
    consumer = threading.Thread(target=lambda: messages.extend(runner.run()), daemon=True)
    consumer.start()
    try:
        deadline = time.monotonic() + 180
        while not any(isinstance(m, RunFinished) for m in list(messages)):
            assert time.monotonic() < deadline, messages
            time.sleep(0.1)
        finished = [m.label for m in messages if isinstance(m, RunFinished)]
        assert finished == [f"{other.label()} r0"]
    finally:
        runner.cancel()
        consumer.join(30)
    assert not consumer.is_alive()
    # The two jobs' threads start their children side by side: in either order.
    own = psutil.Process().nice()
    assert sorted(started) == [(False, own), (True, min(19, own + 10))]
    assert [c for c in psutil.Process().children(recursive=True) if c.pid not in before] == []


@pytest.mark.slow
def test_a_model_that_cannot_load_is_said_once_and_starts_no_further_child(
    models, small_images, cache
):
    configs = [RunConfig(), RunConfig(threads=1), RunConfig(onednn=False)]
    plan = plan_matrix(models / "lambda.keras", small_images, configs, cache=cache, repeats=1)
    assert len(plan.jobs) == 3
    runner = MatrixRunner(plan, cache)
    started = _recording_starts(runner)
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    messages = list(runner.run())
    # The first child and the one started beside it; the third job never starts, and the
    # second's child is stopped with the first's error about the model.
    assert sorted(early for early, _ in started) == [False, True]
    assert [c for c in psutil.Process().children(recursive=True) if c.pid not in before] == []
    assert sum(isinstance(m, ChildFatal) for m in messages) == 1
    failed = [m for m in messages if isinstance(m, RunFailed)]
    assert [m.input_error for m in failed] == [True]  # the later jobs never started
    assert messages[-1].errors and "safe mode" in messages[-1].errors[0]
