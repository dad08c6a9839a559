"""What the window shows, without Qt: the runs of one model and image, the reference, the
cutoff, the view mode, the class and the selected pixel. Widgets take this model and subscribe
to its signals (psygnal, as napari does); they never call each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from psygnal import Signal

from segdiff_gui.core.analysis import class_map, is_multiclass, ulp_distance
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.floatfmt import float32_bits, format_float32
from segdiff_gui.core.study import Study, StudyRun
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, natural_order, study_run, target_image

__all__ = ["FlipStep", "InspectionModel", "LayerMap", "PixelValue", "ViewMode"]

ViewMode = Literal["probability", "difference", "ulp", "flips"]
VIEW_MODES: tuple[ViewMode, ...] = ("probability", "difference", "ulp", "flips")


@dataclass(frozen=True)
class LayerMap:
    """Where in the image one layer of a layer probe differs: max |Δ| over its channels, at
    the layer's own resolution (the grid stretches it over the image)."""

    name: str
    values: np.ndarray  # float32, h×w
    compared: str  # "cpu b1 r0 → cpu b64 r0"

    @property
    def largest(self) -> float:
        finite = self.values[np.isfinite(self.values)]
        return float(finite.max()) if finite.size else 0.0


@dataclass(frozen=True)
class PixelValue:
    """One run's value at one pixel, exactly as the cache holds it."""

    label: str
    value: np.float32
    text: str
    bits: str
    difference: float
    ulps: int
    class_index: int
    is_reference: bool
    key: str = ""


@dataclass(frozen=True)
class FlipStep:
    """A step of the walk through the flipped pixels: where it went, and which of them it is
    (in reading order, from 1)."""

    row: int
    column: int
    number: int
    count: int

    def sentence(self) -> str:
        return f"flip {self.number} of {self.count} at row {self.row}, column {self.column}"


class InspectionModel:
    runs_changed = Signal()
    reference_changed = Signal()
    cutoff_changed = Signal(float)
    mode_changed = Signal(str)
    class_changed = Signal(int)
    pixel_selected = Signal(object)
    image_opacity_changed = Signal(float)
    level_mode_changed = Signal(str)
    layer_map_changed = Signal()

    def __init__(self) -> None:
        self.runs: list[StudyRun] = []
        self.records: dict[str, RunRecord] = {}
        self.image: np.ndarray | None = None
        self.image_problem: InputError | None = None  # why a stored image could not be read
        self.reference_key: str | None = None
        self.cutoff = DEFAULT_CUTOFF
        self.mode: ViewMode = "probability"
        # Difference and ULP views: one scale for all ("shared") or each its own ("per view").
        self.level_mode = "shared"
        self.class_index = 0
        self.selected_pixel: tuple[int, int] | None = None
        self.image_opacity = 0.0
        self.focus_key: str | None = None  # the run last clicked: exports compare it
        self.layer_map: LayerMap | None = None  # a probed layer shown beside the runs
        # Runs whose map could not be read (damaged): left out of the views, said by the window.
        self.unreadable: list[InputError] = []
        self._study: Study | None = None

    # loading --------------------------------------------------------------------------------
    def set_runs(self, store: RunStore, records: list[RunRecord]) -> None:
        """Show ``records`` (one comparable group), read from ``store``."""
        self.runs, self.records, self.unreadable = [], {}, []
        ordered = sorted(records, key=natural_order)
        for record in ordered:
            self._append(store, record)
        ordered = [record for record in ordered if record.key in self.records]
        self.image, self.image_problem = None, None
        if ordered:
            self._read_image(store, ordered[0].target_hash)
        self.reference_key = None
        self.layer_map = None  # of another image, or of runs no longer shown
        self._refresh()

    def add_run(self, store: RunStore, record: RunRecord) -> None:
        """A run finished while the window is open: it appears in its place in the grid."""
        if record.key in self.records:
            return
        if self.runs and record.map_shape != self.runs[0].probabilities.shape:
            return  # not comparable with what is shown
        self._append(store, record)
        self._joined(store, record)

    def add_read_runs(
        self, store: RunStore, read: list[tuple[RunRecord, np.ndarray | None, InputError | None]]
    ) -> None:
        """Runs read elsewhere (a large bundle's, in the background) join the grid, with one
        refresh for all of them; each is a record with its map, or with why it is unreadable."""
        shape = self.runs[0].probabilities.shape if self.runs else None
        for record, probabilities, error in read:
            if error is not None:
                self.unreadable.append(error)
            elif (
                probabilities is not None
                and record.key not in self.records
                and (shape is None or probabilities.shape == shape)
            ):
                self._take(record, probabilities)
        if self.runs:
            self._joined(store, self.records[self.runs[0].key])
        else:
            self._refresh()

    def _joined(self, store: RunStore, record: RunRecord) -> None:
        """Runs joined the grid: each in its place, the target image read once (``record``'s,
        the group's), the views redrawn."""
        self.runs.sort(key=lambda run: natural_order(self.records[run.key]))
        if self.image is None and self.image_problem is None:  # a damaged one is said once
            self._read_image(store, record.target_hash)
        self._refresh()

    def _read_image(self, store: RunStore, image_hash: str) -> None:
        """The target image under the maps; a damaged one is said with the unreadable runs."""
        self.image, self.image_problem = target_image(store, image_hash)
        if self.image_problem is not None:
            self.unreadable.append(self.image_problem)

    def _append(self, store: RunStore, record: RunRecord) -> None:
        try:
            full = store.read_run(record.key)
        except InputError as error:
            self.unreadable.append(error)
            return
        assert full.probabilities is not None
        self._take(record, full.probabilities)

    def _take(self, record: RunRecord, probabilities: np.ndarray) -> None:
        self.records[record.key] = record
        self.runs.append(study_run(record, probabilities))

    def _refresh(self) -> None:
        self._study = None
        self.runs_changed.emit()

    # state ----------------------------------------------------------------------------------
    @property
    def study(self) -> Study | None:
        if self._study is None and self.runs:
            reference = next((r for r in self.runs if r.key == self.reference_key), None)
            self._study = Study(self.runs, cutoff=self.cutoff, reference=reference)
        return self._study

    @property
    def reference(self) -> StudyRun | None:
        return self.study.reference if self.study else None

    @property
    def multiclass(self) -> bool:
        return bool(self.runs) and is_multiclass(self.runs[0].probabilities)

    @property
    def class_count(self) -> int:
        shape = self.runs[0].probabilities.shape if self.runs else ()
        return shape[-1] if len(shape) == 3 else 1

    def show_layer(self, layer_map: LayerMap | None) -> None:
        """Show ``layer_map`` beside the runs (None: no layer)."""
        self.layer_map = layer_map
        self.layer_map_changed.emit()

    def set_reference(self, key: str) -> None:
        if key != self.reference_key:
            self.reference_key = key
            self._study = None
            self.reference_changed.emit()

    def set_cutoff(self, cutoff: float) -> None:
        cutoff = float(min(max(cutoff, 0.0), 1.0))
        if cutoff != self.cutoff:
            self.cutoff = cutoff
            if self._study is not None:  # keep what the cutoff does not change
                self._study = self._study.at_cutoff(cutoff)
            self.cutoff_changed.emit(cutoff)

    def set_mode(self, mode: ViewMode) -> None:
        if mode not in VIEW_MODES:
            raise ValueError(f"unknown view mode {mode!r}")
        if mode != self.mode:
            self.mode = mode
            self.mode_changed.emit(mode)

    def set_level_mode(self, mode: str) -> None:
        if mode not in ("shared", "per view"):
            raise ValueError(f"unknown level mode {mode!r}")
        if mode != self.level_mode:
            self.level_mode = mode
            self.level_mode_changed.emit(mode)

    def set_class(self, index: int) -> None:
        if index != self.class_index:
            self.class_index = index
            self.class_changed.emit(index)

    def set_image_opacity(self, opacity: float) -> None:
        self.image_opacity = opacity
        self.image_opacity_changed.emit(opacity)

    def set_focus(self, key: str) -> None:
        self.focus_key = key

    @property
    def focus_run(self) -> StudyRun | None:
        """The run last clicked, unless it is the reference; else the run with most flips."""
        study = self.study
        if study is None or not study.others:
            return None
        chosen = next((run for run in study.others if run.key == self.focus_key), None)
        return chosen or max(study.others, key=study.flip_count)

    def select_pixel(self, row: int, column: int) -> None:
        shape = self.runs[0].probabilities.shape if self.runs else (0, 0)
        if 0 <= row < shape[0] and 0 <= column < shape[1]:
            self.selected_pixel = (row, column)
            self.pixel_selected.emit(self.selected_pixel)

    def interesting_pixel(self) -> tuple[int, int] | None:
        """Where the story is: the pixel that flips in most runs, else the largest difference,
        else the centre."""
        study = self.study
        if study is None:
            return None
        shape = study.reference.probabilities.shape
        # Flips are sparse: count them by position rather than adding whole-map masks.
        flipped = [np.flatnonzero(self.flips(run)) for run in study.others]
        positions, counts = np.unique(
            np.concatenate([np.empty(0, np.intp), *flipped]), return_counts=True
        )
        if positions.size:  # the first of the positions that flip in most runs
            row, column = np.unravel_index(int(positions[np.argmax(counts)]), shape[:2])
            return int(row), int(column)
        largest = max(study.rows(), key=lambda row: row["max_abs"], default=None)
        location = largest["max_location"] if largest else None
        if location:
            return int(location[0]), int(location[1])
        return shape[0] // 2, shape[1] // 2

    def flip_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows and columns of the pixels that flip in any run, in reading order."""
        study = self.study
        if study is None:
            return np.empty(0, np.intp), np.empty(0, np.intp)
        rows, columns = np.nonzero(study.any_flips())
        return rows, columns

    def flip_step(self, direction: int, after: tuple[int, int] | None) -> FlipStep | None:
        """The next pixel that flips in any run after ``after`` in reading order (``direction``
        +1), or the last one before it (-1), wrapping round; from the first (or the last) with
        no pixel to start from. None when no pixel flips. The walk goes by position, so it
        goes on from a clicked pixel, and from where it was when the cutoff moves."""
        rows, columns = self.flip_positions()
        if rows.size == 0:
            return None
        if after is None:
            index = 0 if direction > 0 else rows.size - 1
        else:
            width = self.runs[0].probabilities.shape[1]
            order = rows * width + columns  # ascending: the positions in reading order
            here = after[0] * width + after[1]
            side = "right" if direction > 0 else "left"
            index = int(np.searchsorted(order, here, side=side)) - (direction < 0)
            index %= rows.size
        return FlipStep(int(rows[index]), int(columns[index]), index + 1, int(rows.size))

    # answers --------------------------------------------------------------------------------
    def plane(self, run: StudyRun) -> np.ndarray:
        """The H×W float32 plane shown for ``run``: the map, or the chosen class of it."""
        data = run.probabilities
        return data[..., self.class_index] if data.ndim == 3 else data

    def flips(self, run: StudyRun) -> np.ndarray:
        study = self.study
        if study is None:
            return np.zeros((0, 0), dtype=bool)
        if run.key == study.reference.key:
            return np.zeros(run.probabilities.shape[:2], dtype=bool)
        return study.flips(run)

    def pixel_values(self, row: int, column: int) -> list[PixelValue]:
        """Every run's exact value at a pixel, with its difference and ULPs to the reference."""
        reference = self.reference
        if reference is None:
            return []
        ref_value = np.float32(self.plane(reference)[row, column])
        values = []
        for run in self.runs:
            value = np.float32(self.plane(run)[row, column])
            classes = class_map(run.probabilities[row : row + 1, column : column + 1], self.cutoff)
            values.append(
                PixelValue(
                    label=run.label,
                    value=value,
                    text=format_float32(value),
                    bits=float32_bits(value),
                    difference=float(np.float64(value) - np.float64(ref_value)),
                    ulps=int(ulp_distance(np.float32(ref_value), value)),
                    class_index=int(classes[0, 0]),
                    is_reference=run.key == reference.key,
                    key=run.key,
                )
            )
        return values
