"""Large-array work spread over the cores with threads.

numpy releases the GIL inside its loops, so threads divide work on whole maps between the cores
without copying anything; on the 2-core reference machine four 8192×8192 maps are turned into
flip masks or colour indices in about half the time. One pool serves the process, so asking
costs no thread start. Only call :func:`thread_map` from outside the pool (a task that waited
on the pool from inside it could wait for ever).

What a caller hands over (the function, the items) and what it gets back are let go of in the
caller's thread, never in a pool thread: the window's grid hands over a function that holds the
grid, and a widget let go of last in another thread is destroyed there, its scene and items
under the GUI thread's feet (a segfault). A pool thread lets go of a task only after it has
handed over the task's result (``concurrent.futures``' ``del work_item``), often after the caller
has moved on, so the pool is given a :class:`_Task` that the caller empties itself.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from functools import cache, partial
from typing import Generic, TypeVar

__all__ = ["for_each_core", "thread_map"]

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def thread_map(function: Callable[[_Item], _Result], items: Iterable[_Item]) -> list[_Result]:
    """``[function(item) for item in items]``, run side by side where there are cores for it."""
    work = list(items)
    cores = _cores()
    if len(work) < 2 or cores < 2:
        return [function(item) for item in work]
    # The caller does the first item itself, and every item the pool has not started by the
    # time the caller gets to it: a call from the GUI thread never waits behind work that a
    # background worker queued in the shared pool.
    tasks = [_Task(partial(function, item)) for item in work[1:]]
    futures = [_shared_pool(cores).submit(task.run) for task in tasks]
    try:
        results = [function(work[0])]
        for task, future in zip(tasks, futures, strict=True):
            if future.cancel():  # not started yet: the caller does it
                task.run()
        for task, future in zip(tasks, futures, strict=True):
            if not future.cancelled():
                future.result()  # the pool has run it
            results.append(task.outcome())
        return results
    except BaseException:
        for future in futures:
            future.cancel()
        # Nothing of this call runs on once it has raised: its items may use buffers that the
        # caller frees as the exception unwinds.
        wait(futures)
        raise
    finally:
        for task in tasks:  # here, in the caller's thread (see the module's docstring)
            task.empty()


class _Task(Generic[_Result]):
    """One item's call, run by the pool (or by the caller, where the pool has not started it).
    Its result or error stays here, out of the pool's future, until the caller takes it, and
    the caller empties it: the pool lets go of nothing but an empty task."""

    __slots__ = ("_call", "_error", "_result")

    def __init__(self, call: Callable[[], _Result]) -> None:
        self._call: Callable[[], _Result] | None = call
        self._result: tuple[_Result] | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        call = self._call
        assert call is not None, "a task runs once, before it is emptied"
        try:
            self._result = (call(),)
        except BaseException as error:  # the caller's to raise, in its own thread
            self._error = error
        finally:
            del call  # this frame holds nothing of the caller's once the pool has run it

    def outcome(self) -> _Result:
        """The result, or the error raised again (in the caller's thread)."""
        if self._error is not None:
            raise self._error
        assert self._result is not None, "taken after the task has run"
        return self._result[0]

    def empty(self) -> None:
        self._call = self._result = self._error = None


def for_each_core(items: Sequence[_Item]) -> list[list[_Item]]:
    """``items`` dealt out in turn into one share per core (fewer when there are fewer items):
    row blocks of a map dealt this way keep every core busy until the end."""
    shares = max(1, min(_cores(), len(items)))
    return [list(items[start::shares]) for start in range(shares)]


@cache
def _cores() -> int:
    """The cores, asked once: a cutoff dragged over 2048² maps calls this a dozen times a
    frame, at tens of microseconds a call."""
    return os.cpu_count() or 1


def _shared_pool(cores: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # The caller works too: one thread fewer keeps the cores busy without crowding.
            _pool = ThreadPoolExecutor(max_workers=cores - 1, thread_name_prefix="segdiff-numpy")
        return _pool
