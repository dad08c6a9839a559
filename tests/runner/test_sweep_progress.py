"""A sweep's progress as every front end says it (runner/outcome.BatchCount): its batches
counted as the child computes them, each once, with the cached ones done from the start, and a
time left from the pace of the batches computed, never of cache hits, smoothed and never
negative. The clock is given to the count, never read: these tests never time."""

from __future__ import annotations

import io
from itertools import count
from pathlib import Path

import pytest

from segdiff_gui.cli import progress_view
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.protocol import Message
from segdiff_gui.resources import demo_model
from segdiff_gui.runner.outcome import BatchCount, TimeLeft, follow, time_left_text
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache
from tests.factories import RecordingBar, small_image_set

IMAGES = 11  # batches of 4: 4 + 4 + 3; of 1: eleven


def _request(tmp_path: Path, images: list[Path]) -> MatrixRequest:
    configs = (RunConfig(batch=1), RunConfig(batch=4))
    cache = ResultCache(tmp_path / "cache")
    return MatrixRequest(demo_model(), tuple(images), cache, configs, repeats=1, sweep=True)


def test_a_sweep_counts_its_batches_once_each_and_its_cached_ones_from_the_start(
    tmp_path, fake_engine
):
    images = small_image_set(tmp_path / "images", IMAGES)
    runner = _request(tmp_path, images).start()
    progress = BatchCount.of(runner.plan)
    clock = count()
    ended: list[int] = []
    # 11 + 3 batches, no pace yet
    assert progress.text(0) == "0 of 14 batches · 0 of 22 runs · estimating the time left"
    follow(runner, lambda m: progress.add(m, next(clock)) and ended.append(progress.done))
    assert ended == list(range(1, 15))  # each batch ended once, one after another
    assert progress.text(next(clock)) == "14 of 14 batches · 22 of 22 runs"
    # Again: every batch is served from the cache, and no time is left to guess.
    again = BatchCount.of(_request(tmp_path, images).start().plan)
    assert (again.done, again.total) == (14, 14)
    assert again.text(0) == "all 22 runs cached"


def test_the_command_lines_bar_says_a_sweeps_batches_in_place_of_each_runs_label(
    tmp_path, fake_engine, monkeypatch
):
    from rich.console import Console

    bar = RecordingBar()
    monkeypatch.setattr(progress_view, "_bar", lambda console: bar)
    said = bar.said
    runner = _request(tmp_path, small_image_set(tmp_path / "images", IMAGES)).start()
    progress_view.drive(runner, Console(force_terminal=True, file=io.StringIO()))
    assert said[0] == "0 of 14 batches · estimating the time left"
    assert said[-1] == "14 of 14 batches"  # the runs: the bar's own count beside it
    assert not [text for text in said if "r0" in str(text)]  # no run's label flickers by


def test_a_sweeps_log_has_a_line_per_batch_not_per_run(tmp_path, fake_engine):
    """Where stderr is no terminal (a CI log, a Slurm task's output), a sweep of thousands of
    runs says each batch that ended, never each run; a single target's runs keep their line."""
    from rich.console import Console

    log = io.StringIO()
    runner = _request(tmp_path, small_image_set(tmp_path / "images", IMAGES)).start()
    progress_view.drive(runner, Console(file=log, width=200))
    lines = log.getvalue().splitlines()
    assert len(lines) == 14 and all(line.startswith("finished ") for line in lines)
    assert lines[0].startswith("finished 1 of 14 batches · ")
    assert lines[-1] == "finished 14 of 14 batches · 22 of 22 runs"
    single = MatrixRequest(
        demo_model(), (tmp_path / "images" / "img_03.png",), ResultCache(tmp_path / "one"),
        (RunConfig(),), repeats=2,
    )  # fmt: skip
    log = io.StringIO()
    progress_view.drive(single.start(), Console(file=log, width=200))
    assert [line.split(" on ")[0] for line in log.getvalue().splitlines()] == [
        "finished cpu b1 r0",
        "finished cpu b1 r1",
    ]


def test_no_time_left_is_said_before_a_second_batch_has_ended():
    left = TimeLeft()
    assert left.seconds(0.0) is None
    left.batch_ended(10.0, 4, 40)  # the first bears the child's start: no pace yet
    assert left.seconds(10.0) is None
    left.batch_ended(12.0, 4, 36)  # 4 images in 2 s: 36 more in 18 s
    assert left.seconds(12.0) == pytest.approx(18.0)


def test_the_time_left_counts_down_never_below_zero_and_follows_a_new_pace_gently():
    left = TimeLeft()
    left.batch_ended(0.0, 10, 100)
    left.batch_ended(1.0, 10, 90)  # 10 images a second: 9 s left
    assert left.seconds(1.0) == pytest.approx(9.0)
    assert left.seconds(4.0) == pytest.approx(6.0)  # counted down between batches
    assert left.seconds(60.0) == 0.0  # a stalled batch: never negative
    steady = TimeLeft()
    steady.batch_ended(0.0, 10, 100)
    for second in range(1, 10):  # a steady pace: the estimate is the work left at that pace
        steady.batch_ended(float(second), 10, 100 - 10 * second)
        assert steady.seconds(float(second)) == pytest.approx(10.0 - second)
    # A batch ten times slower than the others moves the estimate part of the way only.
    slow = TimeLeft()
    slow.batch_ended(0.0, 10, 100)
    slow.batch_ended(1.0, 10, 90)
    slow.batch_ended(11.0, 10, 80)  # 20 images in 11 s: 80 more in 44 s
    shown = slow.seconds(11.0)
    assert shown is not None and 0.0 < shown < 44.0
    assert shown == pytest.approx(0.0 + 0.3 * 44.0)  # from 9 s counted down to 0


def test_cache_hits_are_no_work_the_pace_is_that_of_the_batches_computed(tmp_path, fake_engine):
    images = small_image_set(tmp_path / "images", IMAGES)
    request = _request(tmp_path, images)
    follow(request.start(), lambda _message: None)
    cache = ResultCache(tmp_path / "cache")
    plan = request.plan([])
    # The batch-1 runs of the last five images are computed again; the rest is cached.
    for run in plan.runs:
        if run.config.batch == 1 and run.target >= 6:
            cache.run_path(run.key).unlink()
    runner = _request(tmp_path, images).start()
    progress = BatchCount.of(runner.plan)
    assert (progress.done, progress.total, progress.runs.to_compute) == (9, 14, 5)
    # Each computed batch ends a second after the one before on the given clock.
    ends = count(0.0, 1.0)
    seen: list[float | None] = []

    def add(message: Message) -> None:
        ended_before = progress.runs.ended  # batches of one run each: the batches before
        if progress.add(message, float(ended_before)):
            seen.append(progress.time_left.seconds(float(next(ends))))

    follow(runner, add)
    assert progress.done == 14 and len(seen) == 5
    # A batch of one image a second: four left after the first… none after the last; the
    # nine cached batches (25 images) are no work, else the pace would seem far quicker.
    assert seen[0] is None
    assert seen[1:] == pytest.approx([3.0, 2.0, 1.0, 0.0])


def test_time_left_reads_as_a_person_says_it():
    assert time_left_text(3) == "a few seconds left"
    assert time_left_text(9) == "about 10 s left"
    assert time_left_text(41) == "about 45 s left"
    assert time_left_text(170) == "about 3 min left"
    assert time_left_text(3 * 3600 + 7 * 60) == "about 3 h 07 min left"
