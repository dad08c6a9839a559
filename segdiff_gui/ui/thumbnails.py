"""The image list's thumbnails, decoded on a worker thread. Decoding the demo's 16 images on
the GUI thread held the first paint back by about 40 ms (Pillow's import included), and a folder
of a few hundred photos by seconds; the list now shows the names at once, and each picture joins
its name as it is read, once the list has painted (see after_paint)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from functools import partial
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon, QImage, QPixmap
from PySide6.QtWidgets import QWidget
from superqt.utils import GeneratorWorker, thread_worker

from segdiff_gui.ui.after_paint import AfterFirstPaint
from segdiff_gui.ui.widgets import thumbnail_image

__all__ = ["Thumbnails"]

Shown = Callable[[int, QIcon], None]


Reader = GeneratorWorker[tuple[int, QImage], None, None]


def _read(paths: Sequence[Path]) -> Generator[tuple[int, QImage], None, None]:
    for index, path in enumerate(paths):
        yield index, thumbnail_image(path)


class Thumbnails:
    """The thumbnails of one list of images: ``icons`` (empty until read), read once per list;
    ``shown(index, icon)`` is called on the GUI thread as each arrives. With ``on_screen``
    (the widget that shows them) reading starts once it has painted, else at the event loop's
    next turn."""

    def __init__(self, shown: Shown, on_screen: QWidget | None = None) -> None:
        self._shown = shown
        self._after_paint = AfterFirstPaint(on_screen) if on_screen is not None else None
        self._paths: list[Path] = []
        self.icons: list[QIcon] = []
        self._worker: Reader | None = None

    def read(self, paths: Sequence[Path]) -> list[QIcon]:
        """The icons of ``paths`` as far as they are read; a new list starts reading it (and
        drops what the previous list's reader still sends)."""
        paths = list(paths)
        if paths != self._paths:
            self.stop()
            self._paths, self.icons = paths, [QIcon() for _ in paths]
            worker = thread_worker(_read, start_thread=False)(paths)
            worker.yielded.connect(partial(self._arrived, worker))
            self._worker = worker
            # Not now: the window's first paint comes before the decoding competes with it
            # for the interpreter.
            start = partial(self._start, worker)
            if self._after_paint is not None:
                self._after_paint.then(start)
            else:
                QTimer.singleShot(0, start)
        return list(self.icons)

    def _start(self, worker: Reader) -> None:
        if worker is self._worker:  # a list dropped before it started reads nothing
            worker.start()

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.quit()
            self._worker = None

    def _arrived(self, worker: Reader, item: tuple[int, QImage]) -> None:
        index, image = item
        if worker is not self._worker or image.isNull():
            return  # a list no longer shown, or a file that cannot be read (no picture)
        icon = QIcon(QPixmap.fromImage(image))  # pixmaps only on the GUI thread
        self.icons[index] = icon
        self._shown(index, icon)
