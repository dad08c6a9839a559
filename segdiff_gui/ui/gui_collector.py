"""Python's cycle collector, run on the GUI thread only.

A Qt object left in a reference cycle is destroyed by whichever thread the automatic collector
happens to run in. Destroyed on a worker thread (a matrix's planning, the thumbnails' reader),
its destructor takes a Qt lock and then waits for the GIL, which the GUI thread holds while it
waits for that same lock: the window hangs, for good. So the window's process turns the
automatic collector off and collects on the GUI thread, on a timer, the generation the
automatic collector would have collected (the pattern PyQt and PySide applications use)."""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

__all__ = ["GuiThreadCollector"]


class GuiThreadCollector(QObject):
    """Collects on the GUI thread every ``interval_ms`` while it lives; :meth:`stop` hands the
    collecting back to Python."""

    def __init__(self, parent: QObject, interval_ms: int = 500) -> None:
        super().__init__(parent)
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect)
        self._timer.start(interval_ms)

    def collect(self) -> int:
        """Collect the oldest generation whose count has passed its threshold (it takes the
        younger ones with it), as the automatic collector would; the objects found."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        for generation in (2, 1, 0):
            if counts[generation] > thresholds[generation]:
                return gc.collect(generation)
        return 0

    def stop(self) -> None:
        self._timer.stop()
        gc.enable()
