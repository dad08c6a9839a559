"""Showing a running matrix on a terminal: a rich progress bar when stderr is a terminal, one
plain line per finished run otherwise (CI logs), nothing on stdout (kept for ``--json``)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from segdiff_gui.core.protocol import (
    BatchProgress,
    Message,
    PlanReady,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import MatrixOutcome, follow

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
    console = console or Console(stderr=True)
    live = console.is_terminal and not quiet
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not live,
    )
    task = progress.add_task("planning", total=None)
    labels: dict[str, str] = {}

    def show(message: Message) -> None:
        if isinstance(message, PlanReady):
            progress.update(
                task,
                total=message.total - message.cached,
                description=f"{message.total} runs, {message.cached} cached",
            )
        elif isinstance(message, RunStarted):
            labels[message.key] = message.label
            progress.update(task, description=message.label)
        elif isinstance(message, BatchProgress):
            progress.update(task, description=f"{labels.get(message.key, '')}: {message.what}")
        elif isinstance(message, RunFinished):
            progress.advance(task)
            if not quiet:  # above the bar on a terminal, a log line elsewhere
                console.print(
                    f"{done} {escape(message.label)} on {escape(message.device)} "
                    f"in {message.seconds:.2f} s",
                    highlight=False,
                )
        elif isinstance(message, RunFailed):
            progress.advance(task)
            if not quiet and not message.input_error:
                console.print(f"[red]failed[/] {escape(message.label)}: {escape(message.error)}")
            if not quiet and debug and message.detail:
                # The child's log (its traceback, TensorFlow's own lines): --debug shows it
                # for every failure, input errors too.
                console.print(message.detail, markup=False)

    with progress:
        return follow(runner, show)
