"""segdiff-gui starts its runs before Qt, and the window follows the same runs."""

import threading

import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import AllDone, PlanReady, RunFinished
from segdiff_gui.runner.early import RunsStartedEarly
from segdiff_gui.runner.request import MatrixRequest


def test_the_runs_started_early_give_every_message_in_order_with_the_maps_cached(
    models, small_images, cache, fake_engine
):
    # The runner's thread and messages: the fake engine's child (segdiff-gui starts real ones
    # early in tests/ui/test_app_start.py).
    request = MatrixRequest(
        models / "tiny.keras", tuple(small_images[:1]), cache, (RunConfig(),), repeats=2
    )
    runs = RunsStartedEarly(request.start)
    messages = list(runs.run())  # read after the runs began, as the window does
    assert isinstance(messages[0], PlanReady) and messages[0].total == 2
    finished = [m for m in messages if isinstance(m, RunFinished)]
    assert len(finished) == 2 and all(cache.has(m.key) for m in finished)
    assert isinstance(messages[-1], AllDone) and messages[-1].finished == 2


def test_a_planning_error_reaches_whoever_follows_the_runs(cache, tmp_path):
    def plan_fails():
        raise InputError(str(tmp_path / "gone.keras"), "no such file")

    with pytest.raises(InputError, match="gone.keras: no such file"):
        list(RunsStartedEarly(plan_fails).run())


def test_runs_cancelled_while_they_plan_start_no_child(models, small_images, cache):
    request = MatrixRequest(models / "tiny.keras", tuple(small_images[:1]), cache, repeats=1)
    planning = threading.Event()
    go_on = threading.Event()

    def slow_plan():
        planning.set()
        go_on.wait(30)
        return request.start()

    runs = RunsStartedEarly(slow_plan)
    assert planning.wait(30)
    runs.cancel()  # before the runner exists
    go_on.set()
    messages = list(runs.run())
    assert isinstance(messages[-1], AllDone) and messages[-1].cancelled
    assert not any(isinstance(m, RunFinished) for m in messages)
    assert not cache.records()
