"""The runner driven from a worker thread: the GUI thread never waits on TensorFlow.

The very generator the CLI loops over runs here; every message crosses to the GUI thread as
a Qt signal. The whole matrix runs on this one thread, which matters on Linux: a child is
killed when the thread that started it ends (PR_SET_PDEATHSIG)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QThread, Signal

from segdiff_gui.runner.early import RunsStartedEarly
from segdiff_gui.runner.matrix import MatrixRunner

__all__ = ["MatrixWorker"]


class MatrixWorker(QThread):
    message = Signal(object)
    failed = Signal(object)  # the exception planning or running raised

    def __init__(self, start: Callable[[], MatrixRunner | RunsStartedEarly]) -> None:
        super().__init__()
        self._start = start
        self.runner: MatrixRunner | RunsStartedEarly | None = None
        self._cancelled = False

    def run(self) -> None:
        try:
            runner = self._start()  # may probe devices: keep it off the GUI thread
            self.runner = runner
            if self._cancelled:
                return
            for message in runner.run():
                self.message.emit(message)
        except Exception as error:  # noqa: BLE001 - shown in the window, never a crash
            self.failed.emit(error)

    def cancel(self) -> None:
        """Stop now: kill the child in flight; returns at once (wait() to reap)."""
        self._cancelled = True
        if self.runner is not None:
            self.runner.cancel()
