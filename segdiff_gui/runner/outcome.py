"""What happened to every run of a matrix, folded from the runner's messages: the same for
every front end that drives a :class:`MatrixRunner` to the end (the CLI, the Python API),
whatever each shows while it runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import (
    ChildFatal,
    Message,
    PlanReady,
    RunCached,
    RunFailed,
    RunFinished,
)
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import MatrixPlan

__all__ = ["Drive", "MatrixOutcome", "RunCount", "follow"]


@dataclass
class RunCount:
    """How far a matrix has come, in runs, as every front end's progress counts it (the
    command line's bar, the API's, the window's): every run the matrix lists, those served
    from the cache done from the start, then each that finished or failed."""

    total: int = 0
    cached: int = 0
    ended: int = 0  # computed or failed since the plan

    def add(self, message: Message) -> None:
        """Count one message of :meth:`MatrixRunner.run` (a new plan starts afresh)."""
        if isinstance(message, PlanReady):
            self.total, self.cached, self.ended = message.total, message.cached, 0
        elif isinstance(message, RunFinished | RunFailed):
            self.ended += 1

    @property
    def done(self) -> int:
        return min(self.cached + self.ended, self.total)

    @property
    def to_compute(self) -> int:
        return self.total - self.cached


@dataclass
class MatrixOutcome:
    """Every run's status (``cached``, ``finished``, ``failed``), for exit codes, ``--json``
    and the API's list of failures."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    fatal: ChildFatal | None = None
    interrupted: bool = False

    def in_plan_order(self, plan: MatrixPlan) -> list[dict[str, Any]]:
        """The runs in the order the plan lists them (as asked), not the order they ended in:
        two children at once finish in either order."""
        order = {run.key: index for index, run in enumerate(plan.runs)}
        return sorted(self.runs, key=lambda run: order.get(run["key"], len(order)))

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [run for run in self.runs if run["status"] == "failed"]

    def record(self, message: Message) -> None:
        """Fold one message of :meth:`MatrixRunner.run` into the outcome."""
        if isinstance(message, RunCached):
            self.runs.append({"key": message.key, "label": message.label, "status": "cached"})
        elif isinstance(message, RunFinished):
            self.runs.append(
                {
                    "key": message.key,
                    "label": message.label,
                    "status": "finished",
                    "seconds": message.seconds,
                    "device": message.device,
                }
            )
        elif isinstance(message, RunFailed):
            self.runs.append(
                {
                    "key": message.key,
                    "label": message.label,
                    "status": "failed",
                    "error": message.error,
                    "input_error": message.input_error,
                    "detail": message.detail,
                    "fix": message.fix,
                }
            )
        elif isinstance(message, ChildFatal):
            self.fatal = self.fatal or message

    def input_error(self) -> InputError | None:
        """The error in the input that stopped the matrix, if one did: a child that could not
        load the model or an image, or one reason every run failed for."""
        if self.fatal is not None:
            return InputError(self.fatal.path, self.fatal.problem, self.fatal.fix)
        reasons = {(run["error"], run["fix"]) for run in self.failed if run.get("input_error")}
        if len(reasons) == 1 and len(self.failed) == len(self.runs):
            return InputError.from_message(*reasons.pop())
        return None


# How a front end drives a workflow's matrix to the end, showing it its own way (the CLI's
# progress lines, the API's bar, the window's worker): a reproduction's stages, a sweep's runs.
Drive = Callable[[MatrixRunner], MatrixOutcome]


def follow(runner: MatrixRunner, show: Callable[[Message], None]) -> MatrixOutcome:
    """Drive ``runner`` to the end, folding every message into the outcome and then giving it
    to ``show``. An interrupt (Ctrl-C, a notebook's stop button) kills the child in flight and
    reaps it, and the outcome says it was interrupted: no child computes unseen after its
    caller gave up, and what finished before is in the cache and the outcome."""
    outcome = MatrixOutcome()
    messages = runner.run()
    try:
        for message in messages:
            outcome.record(message)
            show(message)
    except KeyboardInterrupt:
        outcome.interrupted = True
        runner.cancel()
        messages.close()  # its ``finally`` reaps the killed child
    return outcome
