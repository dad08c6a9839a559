"""Driving a planned matrix: one child per group of process-level settings, restarted after a
crash or a hang so that only the run in flight is lost. The CLI loops over :meth:`run`; the
GUI's worker thread drives the very same generator."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from segdiff_gui.core.defaults import DEFAULT_PARALLEL_CHILDREN, DEFAULT_TIMEOUT_S
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import EngineJob, PlannedRun, heartbeat_for
from segdiff_gui.core.protocol import (
    AllDone,
    ChildFatal,
    Message,
    ModelAnswer,
    PlanReady,
    ProbeAnswer,
    RunCached,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.runner.child import ChildProcess, ChildTimeout, describe_exit
from segdiff_gui.runner.devices import remember_inspection, remember_probe
from segdiff_gui.runner.plan import MatrixPlan
from segdiff_gui.storage.cache import ResultCache, WrittenRun
from segdiff_gui.storage.converted import ConvertedStore
from segdiff_gui.storage.locations import compilation_cache_dir, compilation_cache_problem

__all__ = ["MatrixRunner"]


@dataclass(frozen=True)
class _JobEvent:
    """From a job's thread: its child ended its first run, or the job ended (with the error
    that ended it, if one did)."""

    index: int
    begun: bool = False
    error: Exception | None = None


def _said_already(message: Message) -> bool:
    """After one child's input error, what another child says of the same error."""
    return isinstance(message, ChildFatal) or (
        isinstance(message, RunFailed) and message.input_error
    )


def _gpus(job: EngineJob) -> set[str]:
    return {run.config.device for run in job.runs if run.config.is_gpu}


def _next_job(
    waiting: dict[int, EngineJob], running: dict[int, EngineJob], limit: int
) -> int | None:
    """The first waiting job that may start beside those running (``limit`` children at
    most; none on a GPU another child uses)."""
    if len(running) >= limit:
        return None
    busy = set().union(*map(_gpus, running.values()))
    return next((index for index, job in waiting.items() if not _gpus(job) & busy), None)


def compilation_notices(jobs: Sequence[EngineJob]) -> tuple[str, ...]:
    """A line for each store of compiled or converted models its children will not use
    because a folder is not the user's own (engine/backends/jax.py and
    engine/backends/converted.py refuse it by the same test)."""
    said = []
    for job in jobs:
        config = job.process_config()
        runtime = RUNTIMES[config.runtime]
        if runtime.conversion is not None:
            problem = ConvertedStore(job.cache_root).refused()
            line = f"converted models are not kept: {problem}; the model is converted afresh"
        elif config.runtime == "jax" and not config.fresh_repeats:
            problem = compilation_cache_problem(compilation_cache_dir("jax", job.model_hash))
            line = f"JAX's compilation cache is not used: {problem}; the model is compiled afresh"
        else:
            continue
        if problem and line not in said:
            said.append(line)
    return tuple(said)


class MatrixRunner:
    """Run a :class:`MatrixPlan`, yielding progress messages; :meth:`cancel` from any thread.

    ``timeout_s`` bounds the silence of a child (no message at all): TensorFlow's import, a model
    load or one run's inference must each finish within it. Up to ``parallel`` children (one
    per group of process-level settings) compute at once.
    """

    def __init__(
        self,
        plan: MatrixPlan,
        cache: ResultCache,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        child_env: dict[str, str] | None = None,
        finished: Callable[[str], bool] | None = None,
        parallel: int = DEFAULT_PARALLEL_CHILDREN,
    ) -> None:
        self.plan = plan
        self.cache = cache
        # Whether a run's result is stored: its cache entry, read and checked as it arrives
        # (what every front end reads next, then read already); a layer probe's: its probe.
        self._finished = finished or self._stored
        self.timeout_s = timeout_s
        self.child_env = child_env
        self._cancel = threading.Event()
        self._stop = threading.Event()  # an input error, or the consumer gave up
        self._children: list[ChildProcess] = []
        self._listeners: list[Callable[[Message], None]] = []
        self._lock = threading.Lock()
        # Children at once: not more than there are cores.
        self._parallel = max(1, min(parallel, os.cpu_count() or 1))
        # What an input error about which holds for every child (see _run_jobs).
        models = [plan.model_path, *([plan.source.model_path] if plan.source else [])]
        self._inputs = {*map(str, models), *(image.path for image in plan.images)}
        self._image_of = (
            {run.key: plan.images[run.target].name for run in plan.runs}
            if len(plan.targets) > 1
            else {}
        )

    def cancel(self) -> None:
        """Ask the run to stop: the children in flight are killed, no new child starts.

        Only signals: the threads driving the children reap them, so a GUI thread calling
        this never blocks on a process that is slow to die.
        """
        self._cancel.set()
        self._kill_children()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def _child(self) -> ChildProcess | None:
        """The child started last (tests look at it)."""
        with self._lock:
            return self._children[-1] if self._children else None

    def _halted(self) -> bool:
        return self._cancel.is_set() or self._stop.is_set()

    def _kill_children(self) -> None:
        with self._lock:
            for child in self._children:
                child.signal_kill()

    def listen(self, listener: Callable[[Message], None]) -> None:
        """Have ``listener`` hear every message before the front end does, on the thread that
        drives :meth:`run` (a sweep summarises its images as their runs are stored)."""
        self._listeners.append(listener)

    def run(self) -> Generator[Message, None, None]:
        messages = self._messages()
        try:
            for message in messages:
                for listener in self._listeners:
                    listener(message)
                yield message
        finally:
            messages.close()  # a front end that stops early reaps the child in flight

    def _messages(self) -> Generator[Message, None, None]:
        plan = self.plan
        yield PlanReady(
            total=plan.total,
            cached=len(plan.cached),
            children=len(plan.jobs),
            notices=compilation_notices(plan.jobs),
            skipped=tuple((skip.label, str(skip.reason)) for skip in plan.skipped),
        )
        for run in plan.cached:
            yield self._named(RunCached(run.key, run.label))
        finished, failed = 0, len(plan.unstorable)
        if plan.unwritable is not None:  # a read-only cache: what it lacks is not computed
            for run in plan.unstorable:
                yield self._named(
                    RunFailed(run.key, run.label, str(plan.unwritable), input_error=True)
                )
        errors: list[str] = []
        # A sweep's images are kept beside their runs while the runs compute.
        keeper = threading.Thread(
            target=plan.keep_images, args=(self.cache, self._halted), name="images", daemon=True
        )
        keeper.start()
        for message in self._run_jobs(list(plan.jobs)):
            if isinstance(message, RunFinished):
                finished += 1
            elif isinstance(message, RunFailed):
                failed += 1
            elif isinstance(message, ChildFatal):
                errors.append(message.error)
            yield message
        keeper.join()
        yield AllDone(
            finished=finished,
            cached=len(plan.cached),
            failed=failed,
            cancelled=self.cancelled,
            errors=errors,
        )

    def _run_jobs(self, jobs: list[EngineJob]) -> Iterator[Message]:
        """Every job's messages as they come, each job driven by a thread of its own.

        The second job's child starts at once, beside the first, at a lower CPU priority: its
        runtime's import (seconds, mostly on one core) takes the core that the first child's
        import and the window leave idle, so it is ready by the time the first map is, and
        it does not slow the first map down. A runtime's import beside the first child's
        inference instead, as when it waited for the first run's end, took the cores the
        first child's batch-64 runs need: a fresh demo's ten runs took 1.3–1.8 s longer on
        the 2-core reference machine. Any further child starts once every child in flight
        has ended a run. Jobs that share a GPU never overlap."""
        inbox: queue.Queue[tuple[int, Message] | _JobEvent] = queue.Queue()
        failing: int | None = None  # the job whose child met an input error first
        waiting = dict(enumerate(jobs))
        running: dict[int, EngineJob] = {}
        begun: set[int] = set()
        threads: list[threading.Thread] = []
        completed = False
        try:
            while waiting or running:
                # Before any child has ended a run, the first child in flight may have one
                # beside it, at a lower priority.
                early = len(running) == 1 and not begun
                startable = waiting and failing is None and (early or set(running) <= begun)
                if startable and not self._halted():
                    index = _next_job(waiting, running, self._parallel)
                    if index is not None:
                        running[index] = waiting.pop(index)
                        thread = threading.Thread(
                            target=self._drive_job, args=(index, running[index], inbox, early),
                            name=f"segdiff-job-{index}", daemon=True,
                        )  # fmt: skip
                        threads.append(thread)
                        thread.start()
                        continue
                if not running:
                    break  # stopped: the jobs left never start
                item = inbox.get()
                if isinstance(item, _JobEvent):
                    if item.begun:
                        begun.add(item.index)
                        continue
                    running.pop(item.index)
                    if item.error is not None:
                        raise item.error
                    continue
                index, message = item
                if failing not in (None, index) and _said_already(message):
                    continue  # another child's share of the input error
                if isinstance(message, ChildFatal) and failing is None:
                    # An input error holds for every job after it (none starts). One about the
                    # model or an image holds for the children running too: they are stopped.
                    failing = index
                    if message.path in self._inputs:
                        self._stop.set()
                        self._kill_children()
                yield message
            completed = True
        finally:
            if not completed:
                # The consumer gave up (Ctrl-C, a notebook's stop button, an abandoned
                # generator), or a job's thread failed: no child computes unseen.
                self._stop.set()
                self._kill_children()
            for thread in threads:
                thread.join()

    def _drive_job(
        self, index: int, job: EngineJob, inbox: queue.Queue[Any], early: bool = False
    ) -> None:
        begun = False
        error: Exception | None = None
        try:
            for message in map(self._named, self._run_job(job, early)):
                if not begun and isinstance(message, RunFinished | RunFailed):
                    begun = True
                    inbox.put(_JobEvent(index, begun=True))
                inbox.put((index, message))
        except Exception as raised:  # handed to the thread that drives the matrix
            error = raised
        finally:
            inbox.put(_JobEvent(index, error=error))  # whatever ended it: never waited for

    def _stored_in_flight(
        self, in_flight: dict[str, PlannedRun], pending: dict[str, PlannedRun]
    ) -> Iterator[RunFinished]:
        """The runs a child that died or was stopped had written but not yet said finished:
        each result is whole (written whole, then renamed into place), so it is kept."""
        for run in list(in_flight.values()):
            if self._finished(run.key):
                record = self.cache.read_run(run.key, with_map=False)
                pending.pop(run.key, None)
                del in_flight[run.key]
                yield RunFinished(run.key, run.label, 0.0, record.provenance.device or "")

    def _stored(self, key: str) -> bool:
        """Whether the run ``key`` is in the cache and reads back whole (its attributes; its
        map is checked by whoever reads it)."""
        try:
            self.cache.read_run(key, with_map=False)
        except (KeyError, InputError):
            return False
        return True

    def _take_written(self, said: dict[str, Any]) -> None:
        """What the child said it stored, taken for the file while it is the one written (a
        sweep's thousands of runs are not read back one by one to be checked)."""
        written = WrittenRun.from_dict(said)
        if written is not None:
            self.cache.remember_written(written)

    def _named(self, message: Message) -> Message:
        """In a sweep every image has a ``cpu b1 r0``: progress names the image too."""
        key, label = getattr(message, "key", None), getattr(message, "label", None)
        if key not in self._image_of or label is None:
            return message
        return replace(message, label=f"{label} · {self._image_of[key]}")  # type: ignore[call-arg]

    def _remember_model(self, job: EngineJob, answer: ModelAnswer) -> None:
        """What the child said of the model it loaded (its job's: an artefact's source has
        jobs of its own) serves as the model's inspection."""
        remember_inspection(
            self.cache.root, Path(job.model_path), job.model_hash, job.trust_model, answer
        )

    def _start(self, job: EngineJob, early: bool = False) -> ChildProcess:
        """A child for ``job``; ``early``: started beside a first child that has not ended a
        run yet, at a lower CPU priority (see _run_jobs)."""
        # Started outside the lock (writing a sweep's job to the child may wait for it to
        # read): cancel() never waits on it. A child started as the run stops is killed.
        job = replace(job, heartbeat_s=heartbeat_for(self.timeout_s))
        child = ChildProcess("run", job.to_dict(), env=self.child_env)
        if early:
            child.lower_priority()
        with self._lock:
            self._children.append(child)
            if self._halted():
                child.signal_kill()
        return child

    def _run_job(self, job: EngineJob, early: bool = False) -> Iterator[Message]:
        """Run a job's runs, starting a fresh child for the rest after each crash or hang (at
        normal priority: only the job's first child may be ``early``)."""
        pending: dict[str, PlannedRun] = {run.key: run for run in job.runs}
        # Children in a row that died before starting any run (the OOM killer during the
        # model's load, a kill from outside): the first is retried, the second fails the rest.
        fruitless = [0]
        while pending and not self._halted():
            child = self._start(replace(job, runs=tuple(pending.values())), early)
            early = False
            try:
                yield from self._drive_child(job, child, pending, fruitless)
            except BaseException:
                child.signal_kill()  # the consumer gave up: kill now, don't wait for it
                raise
            finally:
                child.close()
                with self._lock:
                    self._children.remove(child)

    def _drive_child(
        self,
        job: EngineJob,
        child: ChildProcess,
        pending: dict[str, PlannedRun],
        fruitless: list[int],
    ) -> Iterator[Message]:
        """Relay one child's messages; afterwards fail the run it died on, if it died. A child
        may have several runs started and not yet said done (one computing while the runs
        before it are written): in the order they started."""
        in_flight: dict[str, PlannedRun] = {}
        progressed = False
        problem = ""
        try:
            for message in child.messages(self.timeout_s, should_stop=self._halted):
                if isinstance(message, RunStarted):
                    if (started := pending.get(message.key)) is not None:
                        in_flight[message.key] = started
                elif isinstance(message, RunFinished | RunFailed):
                    if isinstance(message, RunFinished) and message.written is not None:
                        self._take_written(message.written)
                        message = replace(message, written=None)
                    if isinstance(message, RunFinished) and not self._finished(message.key):
                        message = RunFailed(
                            message.key,
                            message.label,
                            "the child reported success but wrote no result",
                        )
                    pending.pop(message.key, None)
                    in_flight.pop(message.key, None)
                    progressed = True
                elif isinstance(message, ModelAnswer):
                    self._remember_model(job, message)
                elif isinstance(message, ProbeAnswer):
                    remember_probe(self.cache.root, message)
                    continue  # for the next planning, not for the front ends
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
                    # All done, every result stored: the runtime's teardown (most of a second
                    # of TensorFlow's) is not waited for.
                    child.signal_kill()
                    return
        except ChildTimeout as timeout:
            problem = f"{timeout} (timed out; the child was killed)"
            child.signal_kill()
        if self._halted():
            if self.cancelled:  # a run written before the stop is whole: it stays, said so
                yield from self._stored_in_flight(in_flight, pending)
                return
            for run in in_flight.values():
                yield RunFailed(
                    run.key,
                    run.label,
                    "stopped: another engine child met an input error that holds for it too",
                )
            return
        child.close()
        for message in self._stored_in_flight(in_flight, pending):
            yield message
            progressed = True
        problem = problem or f"the engine process {describe_exit(child.process.returncode)}"
        tail = child.stderr_tail()
        # The run it died on is the last it started; those before it waited to be written,
        # and stay for the next child.
        lost = [list(in_flight.values())[-1]] if in_flight else []
        if not lost and not progressed:
            fruitless[0] += 1
            if fruitless[0] < 2:
                return  # died before any run: a fresh child gets them all once more
            lost = list(pending.values())  # twice in a row: retrying would loop
        else:
            fruitless[0] = 0
        for run in lost:
            pending.pop(run.key, None)
            yield RunFailed(run.key, run.label, problem, tail)
