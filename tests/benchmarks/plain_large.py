"""The floor of the large-map benchmark: the same maps, stored raw (``.npy``: nothing to
inflate or check), loaded and painted once in a bare PySide6 + pyqtgraph window, one view
each, as a person would write it by hand. Prints ``painted`` at its first paint and quits.
Run: ``python plain_large.py MAP.npy ...`` (with ``QT_QPA_PLATFORM=offscreen`` where there is
no screen)."""

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
for index, path in enumerate(sys.argv[1:]):
    view = window.addViewBox(row=index // 2, col=index % 2, lockAspect=True)
    view.addItem(pg.ImageItem(np.load(path)))
watch = _FirstPaint()
window.viewport().installEventFilter(watch)
window.resize(1400, 900)
window.show()
sys.exit(app.exec())
