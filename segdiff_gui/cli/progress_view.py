"""Showing a running matrix on a terminal: a rich progress bar when stderr is a terminal, one
plain line per finished run otherwise (CI logs; a sweep's, one per batch), nothing on stdout
(kept for ``--json``)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from segdiff_gui.cli.text import TerminalConsole, log_line
from segdiff_gui.core.protocol import (
    BatchProgress,
    Message,
    PlanReady,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.core.text import printable
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import BatchCount, MatrixOutcome, RunCount, follow

__all__ = ["drive"]


def drive(
    runner: MatrixRunner,
    console: Console | None = None,
    quiet: bool = False,
    debug: bool = False,
    done: str = "finished",
) -> MatrixOutcome:
    """Consume the runner's messages, showing progress on stderr; Ctrl-C cancels cleanly.
    ``done`` is the verb of a finished run's line ("probed" for a layer probe's).

    A failure is printed as it happens, with the child's log tail when ``debug``; input errors
    are left for the caller, which reports one that every run shares as a single line.
    """
    console = console or TerminalConsole(stderr=True)
    # A bar only on a terminal, and only for runs to compute: a cache hit (or a log file)
    # does without it and without importing rich's progress machinery.
    live = console.is_terminal and not quiet and len(runner.plan.jobs) > 0
    progress = _bar(console) if live else _NoBar()
    task = progress.add_task("planning", total=None)
    labels: dict[str, str] = {}
    count = RunCount()  # every run listed: the cached ones done from the start
    # A sweep's bar says its batches and the time left, as the window's Test set tab does,
    # in place of each run's label (thousands of them, each there for an instant); and a log
    # has a line per batch, not per run.
    batches = BatchCount.of(runner.plan) if len(runner.plan.targets) > 1 else None

    def show(message: Message) -> None:
        count.add(message)
        if batches is not None and not isinstance(message, PlanReady):
            now = time.monotonic()
            if batches.add(message, now):
                progress.update(task, description=batches.text(now, runs=False))
                if not live and not quiet:
                    log_line(console, f"{done} {batches.text(now)}")
            elif isinstance(message, BatchProgress) and batches.time_left.seconds(now) is None:
                # What the first batches wait on (a compilation), until there is a pace.
                what = f"{batches.batches_text()} · {message.what}"
                progress.update(task, description=printable(what))
            if isinstance(message, RunStarted | BatchProgress):
                return
        if isinstance(message, PlanReady):
            for notice in (*message.notices, *message.skipped_lines()):
                console.print(f"segdiff: {printable(notice)}", markup=False)
            described = f"{message.total} runs, {message.cached} cached"
            if batches is not None:
                described = batches.text(time.monotonic(), runs=False)
            progress.update(task, total=count.total, completed=count.done, description=described)
        elif isinstance(message, RunStarted):
            labels[message.key] = message.label
            progress.update(task, description=printable(message.label))
        elif isinstance(message, BatchProgress):
            what = f"{labels.get(message.key, '')}: {message.what}"
            progress.update(task, description=printable(what))
        elif isinstance(message, RunFinished):
            progress.update(task, completed=count.done)
            if not quiet and batches is None:  # above the bar on a terminal, else a log line
                # A label may name layers (a repair's trials): one line whatever they hold.
                said = f"{done} {message.label} on {message.device} in {message.seconds:.2f} s"
                console.print(printable(said), markup=False, highlight=False)
        elif isinstance(message, RunFailed):
            progress.update(task, completed=count.done)
            if not quiet and not message.input_error:
                said = printable(f"{message.label}: {message.error}")
                console.print(f"[red]failed[/] {escape(said)}", markup=True)
            if not quiet and debug and message.detail:
                # The child's log (its traceback, TensorFlow's own lines): --debug shows it
                # for every failure, input errors too.
                console.print(message.detail, markup=False)

    with progress:
        return follow(runner, show)


def _bar(console: Console) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    # The description holds a run's label and what its child says: text, never markup (and
    # drawn past the console's own checks, so made printable where it is set).
    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


class _NoBar:
    """What ``drive`` asks of a progress bar, doing nothing."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def add_task(self, *_args: object, **_kwargs: object) -> int:
        return 0

    def update(self, *_args: object, **_kwargs: object) -> None:
        return None
