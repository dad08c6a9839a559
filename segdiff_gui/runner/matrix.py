"""Driving a planned matrix: one child per group of process-level settings, restarted after a
crash or a hang so that only the run in flight is lost. The CLI loops over :meth:`run`; the
GUI's worker thread drives the very same generator."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace

from segdiff_gui.core.defaults import DEFAULT_TIMEOUT_S
from segdiff_gui.core.job import EngineJob, PlannedRun
from segdiff_gui.core.protocol import (
    AllDone,
    ChildFatal,
    Message,
    PlanReady,
    RunCached,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.runner.child import ChildProcess, ChildTimeout, describe_exit
from segdiff_gui.runner.plan import MatrixPlan
from segdiff_gui.storage.cache import ResultCache

__all__ = ["MatrixRunner"]


class MatrixRunner:
    """Run a :class:`MatrixPlan`, yielding progress messages; :meth:`cancel` from any thread.

    ``timeout_s`` bounds the silence of a child (no message at all): TensorFlow's import, a model
    load or one run's inference must each finish within it.
    """

    def __init__(
        self,
        plan: MatrixPlan,
        cache: ResultCache,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        child_env: dict[str, str] | None = None,
        finished: Callable[[str], bool] | None = None,
    ) -> None:
        self.plan = plan
        self.cache = cache
        # Whether a run's result is stored: its cache entry (a layer probe's job: its probe).
        self._finished = finished or cache.has
        self.timeout_s = timeout_s
        self.child_env = child_env
        self._cancel = threading.Event()
        self._child: ChildProcess | None = None
        self._lock = threading.Lock()
        self._fruitless = 0
        self._image_of = (
            {run.key: plan.images[run.target].name for run in plan.runs}
            if len(plan.targets) > 1
            else {}
        )

    def cancel(self) -> None:
        """Ask the run to stop: the child in flight is killed, no new child starts.

        Only signals: the thread driving :meth:`run` reaps the child, so a GUI thread calling
        this never blocks on a process that is slow to die.
        """
        self._cancel.set()
        with self._lock:
            if self._child is not None:
                self._child.signal_kill()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> Generator[Message, None, None]:
        plan = self.plan
        yield PlanReady(total=plan.total, cached=len(plan.cached), children=len(plan.jobs))
        for run in plan.cached:
            yield self._named(RunCached(run.key, run.label))
        finished = failed = 0
        errors: list[str] = []
        for job in plan.jobs:
            for message in map(self._named, self._run_job(job)):
                if isinstance(message, RunFinished):
                    finished += 1
                elif isinstance(message, RunFailed):
                    failed += 1
                elif isinstance(message, ChildFatal):
                    errors.append(message.error)
                yield message
            if self.cancelled or errors:
                break  # an input error (bad model, bad image) holds for every other job too
        yield AllDone(
            finished=finished,
            cached=len(plan.cached),
            failed=failed,
            cancelled=self.cancelled,
            errors=errors,
        )

    def _named(self, message: Message) -> Message:
        """In a sweep every image has a ``cpu b1 r0``: progress names the image too."""
        key, label = getattr(message, "key", None), getattr(message, "label", None)
        if key not in self._image_of or label is None:
            return message
        return replace(message, label=f"{label} · {self._image_of[key]}")  # type: ignore[call-arg]

    def _start(self, job: EngineJob) -> ChildProcess:
        with self._lock:
            self._child = ChildProcess("run", job.to_dict(), env=self.child_env)
            return self._child

    def _run_job(self, job: EngineJob) -> Iterator[Message]:
        """Run a job's runs, starting a fresh child for the rest after each crash or hang."""
        pending: dict[str, PlannedRun] = {run.key: run for run in job.runs}
        # Children in a row that died before starting any run (the OOM killer during the
        # model's load, a kill from outside): the first is retried, the second fails the rest.
        self._fruitless = 0
        while pending and not self.cancelled:
            child = self._start(replace(job, runs=tuple(pending.values())))
            try:
                yield from self._drive_child(child, pending)
            except BaseException:
                # The consumer gave up (Ctrl-C, a notebook's stop button, an abandoned
                # generator): kill now rather than wait for the child to finish by itself.
                child.signal_kill()
                raise
            finally:
                # Also when the consumer abandons this generator: no child computes unseen.
                child.close()
                with self._lock:
                    self._child = None

    def _drive_child(
        self, child: ChildProcess, pending: dict[str, PlannedRun]
    ) -> Iterator[Message]:
        """Relay one child's messages; afterwards fail the run it died on, if it died."""
        in_flight: PlannedRun | None = None
        progressed = False
        problem = ""
        try:
            for message in child.messages(self.timeout_s, should_stop=self._cancel.is_set):
                if isinstance(message, RunStarted):
                    in_flight = pending.get(message.key)
                elif isinstance(message, RunFinished | RunFailed):
                    if isinstance(message, RunFinished) and not self._finished(message.key):
                        message = RunFailed(
                            message.key,
                            message.label,
                            "the child reported success but wrote no result",
                        )
                    pending.pop(message.key, None)
                    in_flight, progressed = None, True
                elif isinstance(message, ChildFatal):
                    yield message
                    for run in pending.values():
                        yield RunFailed(
                            run.key,
                            run.label,
                            message.error,
                            message.detail,
                            input_error=True,
                            fix=message.fix,
                        )
                    pending.clear()
                    return
                yield message
                if not pending:
                    return  # all done: don't wait for TensorFlow's teardown
        except ChildTimeout as timeout:
            problem = f"{timeout} (timed out; the child was killed)"
            child.signal_kill()
        if self.cancelled:
            return
        child.close()
        if in_flight is not None and self._finished(in_flight.key):
            # It died after writing but before saying so: the result is whole, keep it.
            record = self.cache.read_run(in_flight.key, with_map=False)
            pending.pop(in_flight.key, None)
            yield RunFinished(in_flight.key, in_flight.label, 0.0, str(record.provenance["device"]))
            in_flight, progressed = None, True
        problem = problem or f"the engine process {describe_exit(child.process.returncode)}"
        tail = child.stderr_tail()
        lost = [in_flight] if in_flight is not None else []
        if not lost and not progressed:
            self._fruitless += 1
            if self._fruitless < 2:
                return  # died before any run: a fresh child gets them all once more
            lost = list(pending.values())  # twice in a row: retrying would loop
        else:
            self._fruitless = 0
        for run in lost:
            pending.pop(run.key, None)
            yield RunFailed(run.key, run.label, problem, tail)
