"""A grid of image views, one per run, linked in pan and zoom, sharing a crosshair and one
colour bar with fixed levels, with flipped pixels drawn on top in a colour that stands out."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QTimer, Signal
from PySide6.QtWidgets import QWidget

from segdiff_gui.core.parallel import thread_map
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.ui.grid_panels import (
    COLOUR_BAR_ROOM,
    CROSSHAIR_GAP,
    FLIP_RGBA,
    Panel,
    Title,
    best_columns,
    cell,
    crosshair_segments,
    mark_size,
    place,
    remove_all,
)
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.level_indices import COLOURS, flip_marks, level_indices, pooled_any
from segdiff_gui.ui.plain_text import tooltip_text

if TYPE_CHECKING:
    from pyqtgraph.GraphicsScene.mouseEvents import MouseClickEvent  # no types: Any to mypy

__all__ = ["READABLE_PIXEL", "ProbabilityGridView"]

AT_RISK_RGBA = (255, 200, 0, 110)
# Beside an exact run: a flip where the run is right (its class the exact map's, the
# reference's not) in cyan; the flips where it is wrong stay magenta.
RIGHT_FLIP_RGBA = (0, 200, 255, 255)
_OVERLAY_LUT = np.zeros((256, 4), dtype=np.uint8)
_OVERLAY_LUT[1], _OVERLAY_LUT[2], _OVERLAY_LUT[3] = FLIP_RGBA, AT_RISK_RGBA, RIGHT_FLIP_RGBA


def _right_flips(study: GroupAnalysis | None, run: StudyRun, factor: int) -> np.ndarray | None:
    """The (pooled) pixels where ``run`` flips against the reference and is right against the
    exact map: a pooled block only where none of its flips is wrong. None without an exact
    run, and for the reference (it flips nowhere)."""
    if study is None or run.key == study.reference.key:
        return None
    right = study.right_against_exact(run)
    if right is None:
        return None
    flips = study.flips(run)
    settled: np.ndarray = pooled_any(flips & right, factor) & ~pooled_any(flips & ~right, factor)
    return settled


# The colours of a mode without a colour map (ViewMode.colour_map None): a class each.
_CLASS_LUT = np.array([[40, 40, 40], [225, 225, 225]] + [[120, 120, 200]] * 30, np.uint8)


READABLE_PIXEL = 8  # screen pixels across one map pixel when a flip is walked to (N, P)

_LAYER_DECADES = 6  # a probed layer's map spans this many powers of ten below its largest


class ProbabilityGridView(pg.GraphicsLayoutWidget):  # type: ignore[misc]  # pyqtgraph: no types
    """Views of every run of ``model``; emits the pixel under the mouse."""

    pixel_hovered = Signal(int, int)

    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.panels: dict[str, Panel] = {}
        self.layer_panel: Panel | None = None  # the probed layer's difference map, last
        self.colour_bar: pg.ColorBarItem | None = None
        self._columns = 0  # as arranged: see _arrange
        self._shape: tuple[int, ...] = (1, 1)  # of the maps the panels show
        self._title_height = 0.0
        self._crosshair_gap = 0.0  # map units, as last drawn
        self._mark_size = 0.0  # the rings round the flips, screen pixels, as last drawn
        self._overlay_factor = 1  # how far the flip overlays are pooled (see pooled_any)
        self._repool = QTimer(self, singleShot=True, interval=80)
        self._repool.timeout.connect(self._repool_if_zoomed)
        self._user_moved_view = False
        events = model.events
        events.loaded.connect(self.rebuild)
        events.layer_map.connect(self._layer_changed)
        for redraws in (events.reference_key, events.class_index, events.level_mode):
            redraws.connect(self._redraw)
        events.mode.connect(self._mode_changed)
        events.cutoff.connect(self._on_cutoff)
        events.at_risk.connect(self.refresh_overlays)
        events.selected_pixel.connect(self.move_crosshair)
        events.image_opacity.connect(self.refresh_underlay)
        self._hover = pg.SignalProxy(self.scene().sigMouseMoved, rateLimit=60, slot=self._on_hover)
        self.scene().sigMouseClicked.connect(self._on_click)

    # building -------------------------------------------------------------------------------
    def _all_panels(self) -> list[Panel]:
        extra = [self.layer_panel] if self.layer_panel is not None else []
        return [*self.panels.values(), *extra]

    def rebuild(self) -> None:
        remove_all(self.ci)
        self.panels = {}
        self.layer_panel = None
        self._columns = 0
        self._mark_size = 0.0  # new panels' rings: sized once their views have their range
        runs = self.model.runs
        if not runs:
            return
        layer = self.model.layer_map
        titles = [Title(run.label) for run in runs]
        if layer is not None:
            titles.append(Title(f"layer {layer.name}"))
        self._title_height = titles[0].preferredHeight()
        self._shape = runs[0].probabilities.shape[:2]
        self._columns = columns = self._best_columns(len(titles))
        first: pg.ViewBox | None = None
        keys = [run.key for run in runs] + ([""] if layer is not None else [])
        for index, (key, title) in enumerate(zip(keys, titles, strict=True)):
            row, column = cell(index, columns)
            # Placed (see place) and laid out once below. No context menu: pyqtgraph builds
            # one per view otherwise.
            view = pg.ViewBox(enableMenu=False, lockAspect=True, invertY=True)
            place(self.ci, title, row, column)
            title.setMaximumHeight(title.preferredHeight())  # the view takes the rest
            self.ci.layout.setRowStretchFactor(row, 0)
            place(self.ci, view, row + 1, column)
            self.ci.layout.setRowStretchFactor(row + 1, 1)
            # Zoom out no further than the image is small in its cell, and in no further than a
            # few pixels fill it.
            height, width = self._shape
            view.setLimits(maxXRange=4 * width, maxYRange=4 * height, minXRange=4, minYRange=4)
            if first is None:
                first = view
                view.sigRangeChangedManually.connect(self._on_manual_range)
                view.sigRangeChanged.connect(self._on_range_changed)
                # Until the user pans or zooms, keep the whole image in view as sizes settle.
                view.sigResized.connect(self._fit_unless_moved)
            else:
                view.setXLink(first)
                view.setYLink(first)
            if key:
                self.panels[key] = Panel(title, view)
            else:
                self.layer_panel = Panel(title, view)
        self.colour_bar = pg.ColorBarItem(
            values=(0.0, 1.0), colorMap="viridis", interactive=False, width=14
        )
        place(self.ci, self.colour_bar, 0, columns, rowspan=2 * math.ceil(len(titles) / columns))
        self.ci.layout.activate()  # once, for every item: sizes are known before the first paint
        self._draw_layer()
        self._user_moved_view = False
        self.refresh(grows=True)
        self.show_whole_image()
        self.move_crosshair(self.model.selected_pixel)

    def _layer_changed(self) -> None:
        # Built again only when there is a layer to show or one to take away (new runs come
        # with none, and have been built already).
        if self.model.layer_map is not None or self.layer_panel is not None:
            self.rebuild()

    def _draw_layer(self) -> None:
        """The probed layer's max |Δ| over channels, stretched from the layer's resolution
        over the image (a pooled layer's pixel covers several of the image's), on its own
        scale from 0 to its largest difference."""
        layer, panel = self.model.layer_map, self.layer_panel
        if layer is None or panel is None:
            return
        # On a log scale over six decades below the largest difference: a layer differing by
        # 1e-9 in a few places and by 1e-7 in others shows both. Equal pixels stay black.
        top = layer.largest
        with np.errstate(divide="ignore"):
            logs = np.log10(np.where(np.isfinite(layer.values), layer.values, top))
        low = math.log10(top) - _LAYER_DECADES if top > 0 else -1.0
        values = np.where(np.isfinite(logs), logs, low).astype(np.float32)
        lut = pg.colormap.get("inferno").getLookupTable(nPts=COLOURS)
        high = math.log10(top) if top > 0 else 0.0
        panel.data.setImage(values, levels=(low, high), lut=lut, autoLevels=False)
        height, width = self._shape
        panel.data.setRect(QRectF(0, 0, width, height))
        scale = f"1e{low:.0f} … {top:.2g} (log)" if top > 0 else "equal everywhere"
        panel.title.show_title(f"layer {layer.name} · max |Δ| over channels, {scale}")
        panel.title.setToolTip(
            tooltip_text(
                f"{layer.compared}: layer {layer.name}, {layer.values.shape[0]}×"
                f"{layer.values.shape[1]} (max |Δ| over channels, stretched over the image)"
            )
        )

    def _best_columns(self, count: int) -> int:
        # From the panels and the shape they were built for, not from the model: a load that
        # failed part-way leaves the model's runs short while the panels stay as they were.
        bar = COLOUR_BAR_ROOM if self.model.mode.colour_map is not None else 0
        spacing = self.ci.layout.verticalSpacing()
        return best_columns(
            count,
            (self.width() - bar, self.height()),
            self._shape,
            title_room=self._title_height + 2 * spacing,
        )

    def _arrange(self) -> None:
        """Lay the runs out again when the grid's new size wants another number of columns (a
        tall grid wants fewer than a wide one). Items move within the layout; nothing is
        rebuilt or redrawn."""
        if not self.panels:
            return
        every = self._all_panels()
        columns = self._best_columns(len(every))
        if columns == self._columns:
            return
        layout = self.ci.layout
        for item in list(self.ci.items):
            layout.removeItem(item)
        for row in range(layout.rowCount()):
            layout.setRowStretchFactor(row, 0)
        # pyqtgraph keeps its own record of what is where (for clear()); keep it true.
        self.ci.rows, self.ci.items = {}, {}
        for index, panel in enumerate(every):
            row, column = cell(index, columns)
            place(self.ci, panel.title, row, column)
            place(self.ci, panel.view, row + 1, column)
            layout.setRowStretchFactor(row + 1, 1)
        place(self.ci, self.colour_bar, 0, columns, rowspan=2 * math.ceil(len(every) / columns))
        self._columns = columns

    def resizeEvent(self, event: object) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if hasattr(self, "panels"):  # pyqtgraph resizes during construction
            self._arrange()

    # drawing --------------------------------------------------------------------------------
    def _redraw(self) -> None:
        self.refresh()

    def _mode_changed(self) -> None:
        self.refresh()
        self._arrange()  # a mode without a colour bar leaves its room to the views

    def refresh(self, grows: bool = False) -> None:
        """Redraw every image for the current mode, reference and class (``grows``: into
        views just made, whose images replace none: see level_indices)."""
        model = self.model
        reference = model.reference
        if reference is None or not self.panels:
            return
        drawn = model.mode.planes(model, reference)
        planes = drawn.planes
        colour_map = model.mode.colour_map
        if colour_map is None:  # class indices straight into the class colours
            lut = _CLASS_LUT[: max(2, model.class_count)]
        else:
            lut = pg.colormap.get(colour_map).getLookupTable(nPts=COLOURS)
        shown = [run for run in model.runs if run.key in self.panels]

        def indices_of(run: StudyRun) -> np.ndarray | None:
            plane = planes[run.key]
            if plane.dtype.kind != "f":
                return None
            return level_indices(plane, drawn.levels[run.key], grows)

        all_indices = thread_map(indices_of, shown)
        for run, indices in zip(shown, all_indices, strict=True):
            panel = self.panels[run.key]
            plane = planes[run.key]
            if indices is None:  # class bytes already, or a map with NaN to draw transparent
                levels = drawn.levels[run.key]
                panel.data.setImage(plane, levels=levels, lut=lut, autoLevels=False)
            else:
                panel.data.setImage(indices, levels=(0, COLOURS - 1), lut=lut, autoLevels=False)
            title = run.label + (" (ref)" if run.key == reference.key else "")
            if run.key in drawn.scale_text:  # per-view levels: each view says its own scale
                title += f" · {drawn.scale_text[run.key]}"
            panel.title.show_title(title)
        if self.colour_bar is not None:
            # The bar only names the colours: the images get their table above, not from it.
            self.colour_bar.setVisible(colour_map is not None)
            if colour_map is not None:
                self.colour_bar.setColorMap(pg.colormap.get(colour_map))
                self.colour_bar.setLevels(drawn.bar)
                label = drawn.bar_label
                self.colour_bar.getAxis("left").setLabel(label)
                self.colour_bar.getAxis("left").showLabel(label is not None)
        self.refresh_underlay()
        self.refresh_overlays()

    def refresh_overlays(self) -> None:
        model = self.model
        if model.reference is None:
            return
        at_risk = model.study.at_risk if (model.at_risk and model.study) else None
        if model.study is not None:
            model.study.flips_of(model.study.others)  # the masks made side by side
        factor = self._overlay_factor = self._screen_factor()
        shown = [run for run in model.runs if run.key in self.panels]
        risky = pooled_any(at_risk, factor) if at_risk is not None else None

        study = model.study

        def overlay_of(run: StudyRun) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
            # One byte per pixel through a lookup table (0 clear, 1 flip, 2 at risk): a quarter
            # of the memory of RGBA, and at full size the flip mask itself serves as the image.
            flips = pooled_any(model.flips(run), factor)
            count: int | None = None  # of the set blocks, counted by flip_marks
            if study is None or run.key == study.reference.key:
                count = 0  # the reference flips nowhere
            elif factor == 1:
                count = study.flip_count(run)  # unpooled, the blocks are the flips, counted
            marks = flip_marks(flips, factor, self._shape, count)
            right = _right_flips(study, run, factor)
            if risky is None and right is None:
                return flips.view(np.uint8), marks
            index = np.zeros(flips.shape, np.uint8) if risky is None else risky.view(np.uint8) * 2
            index[flips] = 1  # a flip shows over the at-risk colour
            if right is not None:
                index[right] = 3  # this run is right there, the reference wrong
            return index, marks

        for run, (index, (xs, ys)) in zip(shown, thread_map(overlay_of, shown), strict=True):
            panel = self.panels[run.key]
            panel.overlay.setImage(index, autoLevels=False, levels=(0, 255), lut=_OVERLAY_LUT)
            # A pooled overlay covers the map at its full size (and up to factor - 1 pixels
            # beyond its edges, less than one screen pixel).
            panel.overlay.setRect(QRectF(0, 0, index.shape[1] * factor, index.shape[0] * factor))
            panel.marks.setData(x=xs, y=ys)
            panel.marks.setVisible(xs.size > 0)  # none: not even visited when a view paints

    def _screen_factor(self) -> int:
        """How many map pixels one screen pixel covers, rounded up to a power of two so that a
        pooled pixel is never smaller than a screen pixel (1 when zoomed in)."""
        if not self.panels:
            return 1
        view = next(iter(self.panels.values())).view
        size = view.viewPixelSize()
        covered = max(size) if size and all(math.isfinite(s) for s in size) else 1.0
        # Never coarser than the whole map in one block (zoomed far out, a factor would
        # otherwise pad the mask to the zoom's size: terabytes).
        covered = min(covered, max(self._shape))
        return 2 ** math.ceil(math.log2(covered)) if covered > 1 else 1

    def _on_range_changed(self, *_: object) -> None:
        # Zooming across a power of two pools the flip overlays again (once the zoom or the
        # window's layout has settled: the timer restarts on every change); panning never does.
        self._repool.start()
        # The crosshair's gap and the rings are sized in screen pixels: a zoom changes them in
        # map units, a pan does not.
        gap = CROSSHAIR_GAP * self._map_units_per_screen_pixel()
        if not math.isclose(gap, self._crosshair_gap, rel_tol=0.05):
            self.move_crosshair(self.model.selected_pixel)
        self._size_marks()

    def _size_marks(self) -> None:
        """The rings round the flips, as large as the zoom wants (see mark_size)."""
        if not self.panels:
            return
        size = mark_size(1 / self._map_units_per_screen_pixel())
        if size != self._mark_size:
            self._mark_size = size
            for panel in self.panels.values():
                panel.marks.setSize(size)

    def _repool_if_zoomed(self) -> None:
        if not self.isVisible():
            return  # closed (its views may be deleted already); shown again, it refreshes
        self._size_marks()  # a resize without a new range changes the zoom too
        if self._screen_factor() != self._overlay_factor:
            self.refresh_overlays()

    def _on_cutoff(self) -> None:
        # A mode's images may depend on the cutoff (the classes); else only the overlays do.
        if self.model.mode.follows_cutoff:
            self.refresh()
        else:
            self.refresh_overlays()

    def refresh_underlay(self) -> None:
        image = self.model.image
        opacity = self.model.image_opacity
        for panel in self.panels.values():
            if image is None or opacity <= 0:
                panel.underlay.clear()
                panel.data.setOpacity(1.0)
                continue
            gray = image.mean(axis=-1) if image.ndim == 3 else image
            panel.underlay.setImage(gray.astype(np.float32), autoLevels=True)
            panel.data.setOpacity(1.0 - 0.85 * opacity)

    def move_crosshair(self, pixel: tuple[int, int] | None) -> None:
        if pixel is None or not self.panels:
            return
        self._crosshair_gap = gap = CROSSHAIR_GAP * self._map_units_per_screen_pixel()
        xs, ys = crosshair_segments(pixel, self._shape, gap)
        for panel in self._all_panels():
            panel.crosshair.setData(xs, ys, connect="pairs")

    def _map_units_per_screen_pixel(self) -> float:
        size = next(iter(self.panels.values())).view.viewPixelSize()
        return max(size) if size and all(math.isfinite(s) and s > 0 for s in size) else 1.0

    def _on_manual_range(self, *_: object) -> None:
        self._user_moved_view = True

    def _fit_unless_moved(self, *_: object) -> None:
        if not self._user_moved_view:
            self.show_whole_image()

    def show_whole_image(self) -> None:
        """Fit the image (not the crosshair lines, which are infinite) in the linked views."""
        if not self.model.runs or not self.panels:
            return
        height, width = self.model.runs[0].probabilities.shape[:2]
        first = next(iter(self.panels.values())).view
        first.setRange(xRange=(0, width), yRange=(0, height), padding=0.02)
        self._user_moved_view = False  # setRange is not a manual change; keep fitting

    def show_pixel(self, row: int, column: int) -> None:
        """Centre the pixel in every linked view, zoomed in until a map pixel is at least
        :data:`READABLE_PIXEL` screen pixels wide (a closer zoom is kept): a flip walked to
        is seen, with its neighbours."""
        if not self.panels:
            return
        first = next(iter(self.panels.values())).view
        (x0, x1), (y0, y1) = first.viewRange()
        shrink = min(1.0, 1 / (READABLE_PIXEL * self._map_units_per_screen_pixel()))
        half_w, half_h = (x1 - x0) / 2 * shrink, (y1 - y0) / 2 * shrink
        first.setRange(
            xRange=(column + 0.5 - half_w, column + 0.5 + half_w),
            yRange=(row + 0.5 - half_h, row + 0.5 + half_h),
            padding=0,
        )
        self._user_moved_view = True  # kept while the window's layout settles

    # mouse ----------------------------------------------------------------------------------
    def _pixel_at(self, scene_pos: QPointF) -> tuple[str, int, int] | None:
        """The run and pixel under a scene position, if any."""
        for key, panel in self.panels.items():
            if panel.view.sceneBoundingRect().contains(scene_pos):
                point = panel.data.mapFromScene(scene_pos)
                row, column = int(math.floor(point.y())), int(math.floor(point.x()))
                image = panel.data.image
                if image is not None and 0 <= row < image.shape[0] and 0 <= column < image.shape[1]:
                    return key, row, column
        return None

    def _on_hover(self, event: tuple[QPointF]) -> None:
        hit = self._pixel_at(event[0])
        if hit is not None:
            self.pixel_hovered.emit(hit[1], hit[2])

    def _on_click(self, event: MouseClickEvent) -> None:
        hit = self._pixel_at(event.scenePos())
        if hit is not None:
            key, row, column = hit
            self.model.focus_key = key
            self.model.selected_pixel = (row, column)
