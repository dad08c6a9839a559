"""Large-array work spread over the cores with threads.

numpy releases the GIL inside its loops, so threads divide work on whole maps between the cores
without copying anything; on the 2-core reference machine four 8192×8192 maps are turned into
flip masks or colour indices in about half the time. One pool serves the process, so asking
costs no thread start. Only call :func:`thread_map` from outside the pool (a task that waited
on the pool from inside it could wait for ever).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from functools import cache
from typing import TypeVar

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
    futures = [_shared_pool(cores).submit(function, item) for item in work[1:]]
    try:
        results = [function(work[0])] + [None] * len(futures)
        for index, future in enumerate(futures, start=1):
            if future.cancel():  # not started yet: the caller does it
                results[index] = function(work[index])
        for index, future in enumerate(futures, start=1):
            if not future.cancelled():
                results[index] = future.result()
    except BaseException:
        for future in futures:
            future.cancel()
        # Nothing of this call runs on once it has raised: its items may use buffers that the
        # caller frees as the exception unwinds.
        wait(futures)
        raise
    return results  # type: ignore[return-value]  # every None was replaced


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
