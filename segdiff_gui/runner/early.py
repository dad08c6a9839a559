"""Runs started before the window exists.

``segdiff-gui`` on a fresh cache spends its first second importing Qt and building the window,
and each engine child spends its first seconds importing TensorFlow. Started here, before Qt,
the first children import TensorFlow while the window builds; the window then follows the very
same runs: a worker thread reads the messages gathered meanwhile, then the rest as they come.
Qt-free, like the rest of the runner.

The window waits for the first child to start (:meth:`RunsStartedEarly.wait_until_under_way`)
before it imports Qt. Planned on this thread while Qt imported on the window's, the two took
turns at the GIL: on the 2-core reference machine the fresh demo's first child started 0.48 to
0.67 s after launch; planning alone, it starts at 0.28 to 0.33 s. Its first map came about
0.2 s sooner for it (ahead of a plain TensorFlow script's by a median 0.31 s instead of
0.07 s), and the empty window about 0.2 s later: its Qt imports now share the cores with the
child's TensorFlow import from the start. A window on cached runs waits only for planning,
which it would have done anyway.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from segdiff_gui.core.protocol import Message
from segdiff_gui.runner.matrix import MatrixRunner

__all__ = ["FIRST_CHILD_WAIT_S", "RunsStartedEarly"]


@dataclass(frozen=True)
class _Raised:
    error: Exception


_END = object()

# The longest the window waits for the first child: a demo plans in about a tenth of a second,
# while hashing a folder of thousands of images may take seconds (the window then goes on).
FIRST_CHILD_WAIT_S = 0.5


class RunsStartedEarly:
    """``start()`` (which plans and gives a runner) and the runner's messages, driven on a
    thread of their own from now on; :meth:`run` gives the messages in order, as the runner's
    own ``run()`` would, and raises what planning or running raised."""

    def __init__(self, start: Callable[[], MatrixRunner]) -> None:
        self._messages: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._runner: MatrixRunner | None = None
        self._planned = threading.Event()  # start() returned or raised
        self._cancelled = threading.Event()
        # The thread lives until the last run ends: on Linux a child dies with the thread that
        # started it (PR_SET_PDEATHSIG), and the runner's own threads start the children.
        self._thread = threading.Thread(
            target=self._drive, args=(start,), name="segdiff-early-runs", daemon=True
        )
        self._thread.start()

    def _drive(self, start: Callable[[], MatrixRunner]) -> None:
        try:
            try:
                runner = self._runner = start()
            finally:
                self._planned.set()
            if self._cancelled.is_set():  # cancelled while it planned
                runner.cancel()
            for message in runner.run():
                self._messages.put(message)
        except Exception as error:  # noqa: BLE001 - handed to whoever follows the runs
            self._messages.put(_Raised(error))
        finally:
            self._messages.put(_END)

    def wait_until_under_way(self, timeout_s: float = FIRST_CHILD_WAIT_S) -> None:
        """Return once the first engine child has started, or none will (nothing to compute,
        planning failed, cancelled); after ``timeout_s`` at the latest."""
        deadline = time.monotonic() + timeout_s
        if not self._planned.wait(timeout_s):
            return
        if self._runner is not None:
            self._runner.first_child_started.wait(max(0.0, deadline - time.monotonic()))

    def run(self) -> Generator[Message, None, None]:
        while (item := self._messages.get()) is not _END:
            if isinstance(item, _Raised):
                raise item.error
            assert isinstance(item, Message)
            yield item

    def cancel(self) -> None:
        """Stop: as :meth:`MatrixRunner.cancel` (the runs in flight are killed), also when the
        runner is still being planned."""
        self._cancelled.set()
        if self._runner is not None:
            self._runner.cancel()
