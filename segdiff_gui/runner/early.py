"""Runs started before the window exists.

``segdiff-gui`` on a fresh cache spends its first second importing Qt and building the window,
and each engine child spends its first seconds importing TensorFlow. Started here, before Qt,
the first children import TensorFlow while the window builds; the window then follows the very
same runs: a worker thread reads the messages gathered meanwhile, then the rest as they come.
Qt-free, like the rest of the runner.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass

from segdiff_gui.core.protocol import Message
from segdiff_gui.runner.matrix import MatrixRunner

__all__ = ["RunsStartedEarly"]


@dataclass(frozen=True)
class _Raised:
    error: Exception


_END = object()


class RunsStartedEarly:
    """``start()`` (which plans and gives a runner) and the runner's messages, driven on a
    thread of their own from now on; :meth:`run` gives the messages in order, as the runner's
    own ``run()`` would, and raises what planning or running raised."""

    def __init__(self, start: Callable[[], MatrixRunner]) -> None:
        self._messages: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._runner: MatrixRunner | None = None
        self._cancelled = threading.Event()
        # The thread lives until the last run ends: on Linux a child dies with the thread that
        # started it (PR_SET_PDEATHSIG), and the runner's own threads start the children.
        self._thread = threading.Thread(
            target=self._drive, args=(start,), name="segdiff-early-runs", daemon=True
        )
        self._thread.start()

    def _drive(self, start: Callable[[], MatrixRunner]) -> None:
        try:
            runner = self._runner = start()
            if self._cancelled.is_set():  # cancelled while it planned
                runner.cancel()
            for message in runner.run():
                self._messages.put(message)
        except Exception as error:  # noqa: BLE001 - handed to whoever follows the runs
            self._messages.put(_Raised(error))
        finally:
            self._messages.put(_END)

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
