"""What happened to every run of a matrix, folded from the runner's messages: the same for
every front end that drives a :class:`MatrixRunner` to the end (the CLI, the Python API),
whatever each shows while it runs."""

from __future__ import annotations

import math
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

__all__ = [
    "BatchCount",
    "Drive",
    "MatrixOutcome",
    "RunCount",
    "TimeLeft",
    "follow",
    "time_left_text",
]


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


# How much a new estimate of the time left moves the one shown (the rest: the shown one counted
# down): an estimate follows a change of pace over a few batches instead of jumping at each.
_FOLLOW = 0.3


@dataclass
class TimeLeft:
    """The time a sweep has left, from the pace of the batches it computed: counted from the
    end of the first (which bears a child's start), in images put through the model (a batch
    of 64 is 64 times a batch of 1), so that runs served from the cache are no work. No
    estimate before a second batch has ended; each new one moves the shown one only part
    of the way (:data:`_FOLLOW`), which counts down meanwhile and is never negative. Times
    are the caller's clock (``time.monotonic()``), given, never read here."""

    _first: float | None = None  # when the first computed batch ended
    _work: int = 0  # images of the batches computed since then
    _estimate: float | None = None  # seconds left, as of ``_at``
    _at: float = 0.0

    def batch_ended(self, now: float, work: int, work_left: int) -> None:
        """A computed batch of ``work`` images ended at ``now``; ``work_left`` images are
        still to compute."""
        if self._first is None:
            self._first = now
            return
        self._work += work
        elapsed = now - self._first
        if elapsed <= 0 or self._work <= 0:
            return
        fresh = work_left * elapsed / self._work
        if self._estimate is None:
            self._estimate = fresh
        else:
            shown = self.seconds(now) or 0.0
            self._estimate = shown + _FOLLOW * (fresh - shown)
        self._at = now

    def seconds(self, now: float) -> float | None:
        """Seconds left at ``now`` (counted down since the last batch), or None: no pace yet."""
        if self._estimate is None:
            return None
        return max(0.0, self._estimate - max(0.0, now - self._at))


def time_left_text(seconds: float) -> str:
    """``about 3 min left``: rounded as a person says it, never finer than it is known."""
    if seconds < 5:
        return "a few seconds left"
    if seconds < 60:
        return f"about {math.ceil(seconds / 5) * 5} s left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60:02d} min left"


@dataclass
class BatchCount:
    """How far a sweep has come in batches, as the window's Test set tab and the command
    line's bar say it: its batches are its configurations' and repeats' cuts of the set (the
    runs of one batch share a forward pass), those whose every run is cached done from the
    start, each other done once its every run has finished or failed; with the runs counted
    as :class:`RunCount` counts them, and the :class:`TimeLeft` of the batches computed."""

    runs: RunCount
    total: int
    done: int
    _batch_of: dict[str, int]  # a run's key → its batch's number
    _left: list[int]  # each batch's runs not yet ended
    _work: list[int]  # each batch's images put through the model
    _work_left: int
    time_left: TimeLeft = field(default_factory=TimeLeft)

    @classmethod
    def of(cls, plan: MatrixPlan) -> BatchCount:
        numbers: dict[tuple[object, ...], int] = {}
        batch_of: dict[str, int] = {}
        for run in plan.runs:
            batch = (run.config, run.tag, run.repeat, run.batch)
            batch_of[run.key] = numbers.setdefault(batch, len(numbers))
        left, work = [0] * len(numbers), [0] * len(numbers)
        cached = {run.key for run in plan.cached}
        for run in plan.runs:
            number = batch_of[run.key]
            work[number] = len(run.batch)
            if run.key not in cached:
                left[number] += 1
        done = sum(1 for count in left if not count)
        runs = RunCount(total=plan.total, cached=len(cached))
        work_left = sum(size for size, count in zip(work, left, strict=True) if count)
        return cls(runs, len(numbers), done, batch_of, left, work, work_left)

    def add(self, message: Message, now: float) -> bool:
        """Count one message of the sweep's :meth:`MatrixRunner.run`, at ``now``; True where
        it ended a batch."""
        if isinstance(message, PlanReady):
            return False  # counted from the plan
        self.runs.add(message)
        if not isinstance(message, RunFinished | RunFailed):
            return False
        number = self._batch_of.get(message.key)
        if number is None or self._left[number] <= 0:
            return False
        self._left[number] -= 1
        if self._left[number]:
            return False
        self.done += 1
        self._work_left -= self._work[number]
        self.time_left.batch_ended(now, self._work[number], self._work_left)
        return True

    def batches_text(self) -> str:
        return f"{self.done:,} of {self.total:,} batches"

    def left_text(self, now: float) -> str:
        """The time left; before there is a pace, that it is being estimated; '' once every
        batch has ended."""
        if self.done >= self.total:
            return ""
        seconds = self.time_left.seconds(now)
        return "estimating the time left" if seconds is None else time_left_text(seconds)

    def text(self, now: float, runs: bool = True) -> str:
        """``37 of 128 batches · 2,304 of 8,192 runs · about 3 min left`` (the runs left out
        where a bar counts them already)."""
        if not self.runs.to_compute:
            return f"all {self.runs.total:,} runs cached"
        counted = f"{self.runs.done:,} of {self.runs.total:,} runs" if runs else ""
        return " · ".join(filter(None, [self.batches_text(), counted, self.left_text(now)]))


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
