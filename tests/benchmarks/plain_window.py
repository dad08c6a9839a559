"""The floor of the start-up benchmark: a bare PySide6 + pyqtgraph window showing one 256² map,
as a person would write it by hand. Prints ``painted`` at its first paint and quits.
Run: ``python plain_window.py`` (with ``QT_QPA_PLATFORM=offscreen`` where there is no screen)."""

import sys

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication


class _FirstPaint(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Paint:
            QTimer.singleShot(0, lambda: (print("painted", flush=True), app.quit()))
        return False


app = QApplication(sys.argv[:1])
window = pg.GraphicsLayoutWidget()
view = window.addViewBox(lockAspect=True)
view.addItem(pg.ImageItem(np.random.default_rng(0).random((256, 256), dtype=np.float32)))
watch = _FirstPaint()
window.viewport().installEventFilter(watch)
window.resize(1400, 900)
window.show()
sys.exit(app.exec())
