"""Small widget helpers shared by the panels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QIcon, QImage, QPixmap
from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.image_memory import check_images_fit
from segdiff_gui.io.images import read_image
from segdiff_gui.io.pictures import picture_rgb

__all__ = ["cell_text", "fill_row", "read_only_table", "thumbnail", "thumbnail_image"]


def read_only_table(headers: Sequence[str]) -> QTableWidget:
    """A table for reading numbers: fitted columns, no row numbers, no editing."""
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    return table


def fill_row(table: QTableWidget, row: int, cells: Sequence[str]) -> None:
    """Show ``cells`` in ``row``, changing only the text that changed: the inspector refills
    its table on every cutoff while the slider is dragged, and new items cost a re-layout."""
    for column, text in enumerate(cells):
        item = table.item(row, column)
        if item is None:
            table.setItem(row, column, QTableWidgetItem(text))
        elif item.text() != text:
            item.setText(text)


def cell_text(table: QTableWidget, row: int, column: int) -> str:
    """The text of a cell (an empty cell has none)."""
    item = table.item(row, column)
    return item.text() if item is not None else ""


def thumbnail_image(path: Path, size: int = 56) -> QImage:
    """A small picture of an image of any dtype (in its colours, stretched to its own range),
    fitted into a ``size`` square; a null image where the file cannot be read. Safe off the
    GUI thread (a QImage, not yet a pixmap)."""
    try:
        check_images_fit([[path]])  # from its header: a lying one is not decoded
        decoded = read_image(path)
    except InputError:
        return QImage()
    # Every few pixels, enough for the square, before the float copy.
    step = max(1, min(decoded.shape[:2]) // (4 * size))
    picture = picture_rgb(decoded[::step, ::step])
    del decoded
    height, width = picture.shape[:2]
    image = QImage(picture.data, width, height, 3 * width, QImage.Format.Format_RGB888)
    # Its own shape, fitted into the square: a 80×100 photo must not look like a 100×100 one.
    # (scaled() copies, so the picture outlives ``picture``.)
    return image.scaled(
        size, size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
    )


def thumbnail(path: Path, size: int = 56) -> QIcon:
    """:func:`thumbnail_image` as an icon (on the GUI thread)."""
    return QIcon(QPixmap.fromImage(thumbnail_image(path, size)))
