"""``segdiff-gui --quit-when-painted``: for the start-up benchmark. Prints ``painted`` and quits
as soon as the views have painted with results (or painted empty, when there are none), so that
a benchmark can time launch → results on screen from outside the process."""

from __future__ import annotations

import sys

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

from segdiff_gui.ui.main_window import MainWindow

__all__ = ["quit_when_painted"]


class _PaintWatch(QObject):
    def __init__(self, app: QApplication, window: MainWindow) -> None:
        super().__init__(window)
        self.app, self.window, self.done, self.first_said = app, window, False, False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        # The first paint with results; a window with none to show (a cache without the
        # demo's runs, say) quits at its first paint instead of waiting for ever. While a
        # large bundle's other runs are still being read, a paint is only the first map's:
        # said ("first paint"), and the watch goes on to the paint that shows them all.
        if not self.done and event.type() == QEvent.Type.Paint:
            if self.window.sessions.reading:
                if not self.first_said:
                    self.first_said = True
                    print(f"first paint {len(self.window.model.runs)} runs", flush=True)
            else:
                self.done = True
                QTimer.singleShot(0, self._report)  # after this paint has reached the screen
        return False

    def _report(self) -> None:
        tensorflow = "tensorflow" in sys.modules  # the GUI process must never import it
        print(f"painted {len(self.window.model.runs)} runs tensorflow={tensorflow}", flush=True)
        sys.stdout.flush()
        self.app.quit()


def quit_when_painted(app: QApplication, window: MainWindow) -> None:
    watch = _PaintWatch(app, window)
    window.grid.viewport().installEventFilter(watch)
