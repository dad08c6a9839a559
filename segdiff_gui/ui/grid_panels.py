"""One run's panel of the grid (its elided title above a view box of underlay, data, flip
overlay, rings round the flips and crosshair) and the grid's geometry: how many columns fit,
where a panel goes, where the crosshair's segments run and how large a ring is."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics

from segdiff_gui.core.text import printable
from segdiff_gui.ui.plain_text import as_html, tooltip_text

__all__ = [
    "COLOUR_BAR_ROOM",
    "CROSSHAIR_GAP",
    "FLIP_RGBA",
    "MARK_SIZE",
    "Panel",
    "Title",
    "best_columns",
    "cell",
    "crosshair_segments",
    "mark_size",
    "place",
    "remove_all",
]

TITLE_SIZE = "9pt"
FLIP_RGBA = (255, 0, 170, 255)  # magenta: stands out on viridis, on the diverging map and on gray
# Each flip is ringed this many screen pixels across, at any zoom (as napari sizes points on
# the canvas): a single flipped pixel of a large map is one screen pixel, or less, otherwise.
MARK_SIZE = 15
COLOUR_BAR_ROOM = 70  # pixels: the colour bar and its numbers, beside the views


def best_columns(
    count: int, room: tuple[float, float], image_shape: tuple[int, ...], title_room: float = 28
) -> int:
    """How many columns show ``count`` images of ``image_shape`` (rows, columns) largest in a
    grid of ``room`` (width, height) pixels, each view under a title ``title_room`` high."""
    width, height = max(room[0], 1.0), max(room[1], 1.0)  # a grid not laid out yet
    rows_of_image, columns_of_image = image_shape[:2]

    def scale(columns: int) -> float:
        rows = math.ceil(count / columns)
        cell_width, cell_height = width / columns, height / rows - title_room
        return min(cell_width / columns_of_image, cell_height / rows_of_image)

    # The fewest columns among equals: a column is the costlier to lose to a title.
    return max(range(1, count + 1), key=lambda columns: (scale(columns), -columns))


CROSSHAIR_GAP = 4  # screen pixels between the crosshair's lines and the chosen pixel


def crosshair_segments(
    pixel: tuple[int, int], shape: tuple[int, ...], gap: float
) -> tuple[np.ndarray, np.ndarray]:
    """The crosshair through ``pixel`` of a map of ``shape`` as segment end points (x, y, in
    pairs): through the pixel's centre, across the image only, leaving ``gap`` (map units)
    clear around the pixel. A segment that would have no length is dropped."""
    row, column = pixel
    height, width = shape[:2]
    x, y = column + 0.5, row + 0.5
    segments = [
        ((x, 0.0), (x, row - gap)),  # above
        ((x, row + 1 + gap), (x, float(height))),  # below
        ((0.0, y), (column - gap, y)),  # left
        ((column + 1 + gap, y), (float(width), y)),  # right
    ]
    kept = [(a, b) for a, b in segments if (b[0] - a[0]) + (b[1] - a[1]) > 0]
    points = np.array([point for segment in kept for point in segment], dtype=float)
    points = points.reshape(-1, 2)
    return points[:, 0], points[:, 1]


def mark_size(pixel: float) -> float:
    """A ring's size in screen pixels around a map pixel ``pixel`` screen pixels wide: at
    least :data:`MARK_SIZE`, and wide enough to go round the pixel, corners and all."""
    return max(float(MARK_SIZE), pixel * math.sqrt(2) + 6)


def place(grid: pg.GraphicsLayout, item: object, row: int, column: int, rowspan: int = 1) -> None:
    """Put ``item`` in ``grid`` at ``row``, ``column``, without pyqtgraph's addItem, which lays
    the whole grid out again after every item (ten runs: 21 layouts, a fifth of the window's
    start-up); the caller lays out once. pyqtgraph's record of what is where is kept true."""
    grid.layout.addItem(item, row, column, rowspan, 1)
    grid.items[item] = [(row + i, column) for i in range(rowspan)]
    for r, c in grid.items[item]:
        grid.rows.setdefault(r, {})[c] = item


def remove_all(grid: pg.GraphicsLayout) -> None:
    """Take every item out of ``grid`` and its scene (pyqtgraph's clear() expects each to have
    been added through its addItem, with a border of its own)."""
    scene = grid.scene()
    for item in list(grid.items):
        grid.layout.removeItem(item)
        scene.removeItem(item)
    grid.rows, grid.items = {}, {}
    grid.currentRow = grid.currentCol = 0


def cell(index: int, columns: int) -> tuple[int, int]:
    """The layout row of run ``index``'s title and its column. Each run takes two rows: its
    title, then its view (the row below), which gets the height."""
    return 2 * (index // columns), index % columns


class Title(pg.LabelItem):  # type: ignore[misc]  # pyqtgraph ships no types
    """A run's title, as tall as its text but with no say in its column's width (linked,
    aspect-locked views of different widths would each show a different part of the image).
    A title longer than its column is elided in the middle, keeping the repeat at its end; the
    whole of it is the tooltip. A label is HTML to pyqtgraph: a title is one line of escaped
    text (a run's label and a layer's name come from files)."""

    def __init__(self, text: str) -> None:
        self.whole = text
        super().__init__(as_html(printable(text)), size=TITLE_SIZE)
        # Too narrow for even "…", the text item's own margins would still spill over.
        self.setFlag(self.GraphicsItemFlag.ItemClipsChildrenToShape)

    def show_title(self, text: str) -> None:
        self.whole = text
        self.setToolTip(tooltip_text(text))
        self._fit()

    def updateMin(self) -> None:  # noqa: N802 - pyqtgraph's name
        super().updateMin()
        self.setMinimumWidth(0)
        self.setPreferredWidth(0)

    def resizeEvent(self, event: object) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        font = QFont(self.item.font())
        font.setPointSizeF(float(TITLE_SIZE.removesuffix("pt")))
        room = max(0, int(self.size().width()) - 10)  # the text item adds 4 pixels each side
        line = printable(self.whole)
        shown = as_html(QFontMetrics(font).elidedText(line, Qt.TextElideMode.ElideMiddle, room))
        if shown != self.text:  # setting a label's HTML costs a millisecond
            self.setText(shown, size=TITLE_SIZE)


class Panel:
    """One run's view: a title above a view box of underlay, data image, flip overlay and
    crosshair. A bare view box, not a plot item: the axes would be hidden anyway, and ten plot
    items take a tenth of a second of the start-up to build."""

    def __init__(self, title: Title, view: pg.ViewBox) -> None:
        self.title, self.view = title, view
        self.underlay = pg.ImageItem(axisOrder="row-major")
        self.data = pg.ImageItem(axisOrder="row-major")
        self.overlay = pg.ImageItem(axisOrder="row-major")
        for z, item in enumerate((self.underlay, self.data, self.overlay)):
            item.setZValue(z)
            view.addItem(item)
        # A ring round each flip (where they are few: level_indices.flip_marks), sized in
        # screen pixels.
        self.marks = pg.ScatterPlotItem(
            pxMode=True, symbol="o", size=MARK_SIZE, pen=pg.mkPen(FLIP_RGBA, width=2),
            brush=pg.mkBrush(None), hoverable=False,
        )  # fmt: skip
        self.marks.setZValue(4)
        view.addItem(self.marks, ignoreBounds=True)
        # The crosshair: four segments over the image only, stopping short of the chosen pixel
        # so that the pixel itself (a flip, often) stays in sight.
        self.crosshair = pg.PlotCurveItem(pen=pg.mkPen((255, 255, 255, 150), width=1))
        self.crosshair.setZValue(5)
        view.addItem(self.crosshair, ignoreBounds=True)
