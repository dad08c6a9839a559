"""The progress said "matrix 2 / 2" while 12 runs were listed. Every front end's
progress counts the runs the matrix lists, those served from the cache done from the start
(runner/outcome.RunCount): the command line's bar, the API's tqdm bar and the window's
(tests/ui/test_panels.py)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from segdiff_gui.api.progress import ProgressBar
from segdiff_gui.cli import progress_view
from segdiff_gui.core.protocol import AllDone, Message, PlanReady, RunFailed, RunFinished
from segdiff_gui.runner.outcome import RunCount
from tests.factories import RecordingBar

# Twelve runs listed, ten of them cached: one computes, one fails.
PLAN = PlanReady(total=12, cached=10, children=1)
ENDS: list[Message] = [RunFinished("k1", "cpu b1 r0", 0.1, "cpu:0"), RunFailed("k2", "b r0", "x")]


def test_the_count_is_of_every_run_listed_the_cached_done_from_the_start():
    count = RunCount()
    count.add(PLAN)
    assert (count.done, count.total, count.to_compute) == (10, 12, 2)
    for message in ENDS:
        count.add(message)
    assert (count.done, count.total, count.ended) == (12, 12, 2)
    count.add(PlanReady(total=3, cached=0, children=1))  # a new matrix starts afresh
    assert (count.done, count.total) == (0, 3)


def test_the_command_lines_bar_counts_every_run_listed(monkeypatch):
    from rich.console import Console

    bar = RecordingBar()
    monkeypatch.setattr(progress_view, "_bar", lambda console: bar)
    runner = SimpleNamespace(
        plan=SimpleNamespace(jobs=[object()], targets=(0,)),
        run=lambda: iter([PLAN, *ENDS, AllDone(finished=1, cached=10, failed=1)]),
    )
    console = Console(force_terminal=True, file=io.StringIO())  # a terminal: drive draws a bar
    progress_view.drive(runner, console)  # type: ignore[arg-type]
    assert bar.seen[0] == (10, 12)  # planned: the ten cached are done
    assert (bar.completed, bar.total) == (12, 12)


def test_the_apis_bar_counts_every_run_listed(capsys):
    bar = ProgressBar(True, "runs")
    bar(PLAN)
    assert (bar._bar.n, bar._bar.total) == (10, 12)
    for message in ENDS:
        bar(message)
    assert (bar._bar.n, bar._bar.total) == (12, 12)
    bar.close()
    assert "12/12" in capsys.readouterr().err
