"""What the window shows, without Qt: the runs of one model and image, the reference, the
cutoff, the view mode and its levels, the class, the selected pixel, the image under the
maps, the at-risk shading, the run last clicked and a probed layer.

``InspectionModel`` is an evented dataclass (psygnal, as napari's models): each field is
declared once, below, and has an event of the same name (``model.events.cutoff``) that every
write emits, with the new and the old value, when the value changes. A write is checked (a
view mode of the table, a pixel on the maps, a reference among the runs) or bounded (the
cutoff and the opacity to [0, 1]) before it is made. Widgets write the fields and connect to
the events; they never call each other. The runs and what was read with them are one value,
``Loaded``, replaced whole, so that a group of runs arrives in one event."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import numpy as np
from psygnal import SignalGroupDescriptor

from segdiff_gui.core.analysis import class_map, is_multiclass, tie_mask, ulp_distance
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.exact import exact_decisions, right_mask, undecidable_mask
from segdiff_gui.core.floatfmt import float32_bits, float64_bits, format_float32, format_float64
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import (
    RunStore,
    exact_of,
    natural_order,
    study_run,
    target_image,
)
from segdiff_gui.ui import view_modes
from segdiff_gui.ui.view_modes import ViewMode
from segdiff_gui.ui.view_planes import LEVEL_MODES, LevelMode

__all__ = ["FlipStep", "InspectionModel", "LayerMap", "Loaded", "PixelValue"]


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
    # Beside an exact (float64) run: float32 steps from the exact value rounded to float32,
    # and whether the class is the exact map's (core/exact.right_mask: a tie of the run's top
    # classes is no answer; None without one, or where the exact map is tied; the exact run's
    # own value is its float64, in full, in ``text`` and ``bits``).
    exact_ulps: int | None = None
    right: bool | None = None
    is_exact: bool = False
    tied: bool = False  # a multi-class run's top classes exactly equal: argmax's lowest class


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


@dataclass(frozen=True, eq=False)
class Loaded:
    """The runs on show (one comparable group, in their natural order) with their records, the
    target image under them or why it could not be read, and the runs whose maps could not be
    read (left out of the views, said by the window). A value: replaced whole, never changed
    in place, so that the model's ``loaded`` event is the only news of new runs."""

    runs: tuple[StudyRun, ...] = ()
    records: Mapping[str, RunRecord] = field(default_factory=lambda: MappingProxyType({}))
    image: np.ndarray | None = None
    image_problem: InputError | None = None
    unreadable: tuple[InputError, ...] = ()
    # The exact run (the model in float64), beside the runs and their reference, never one of
    # the views; None where the group has none.
    exact: StudyRun | None = None


@dataclass(eq=False)
class _StudyCache:
    """The study of the runs on show, made once for them and their reference, and carried to
    another cutoff (``GroupAnalysis.at_cutoff``: only the flips are redone)."""

    study: GroupAnalysis | None = None
    loaded: Loaded | None = None
    reference_key: str | None = None


def _private(name: str) -> str | None:
    """A field's event: its own name; a private field (a cache) has none."""
    return None if name.startswith("_") else name


@dataclass(eq=False)
class InspectionModel:
    """The window's state; see the module's docstring. Fields are written as attributes
    (``model.cutoff = 0.4``) and heard of through ``model.events.<field>``."""

    loaded: Loaded = field(default_factory=Loaded)
    reference_key: str | None = None  # None: the default reference (core.study)
    cutoff: float = DEFAULT_CUTOFF
    mode: ViewMode = view_modes.VIEW_MODES[0]
    # Difference and ULP views: one scale for all ("shared") or each its own ("per view").
    level_mode: LevelMode = "shared"
    class_index: int = 0  # the class of a multi-class map the views show
    selected_pixel: tuple[int, int] | None = None
    image_opacity: float = 0.0  # of the input image under the maps
    at_risk: bool = False  # shade the pixels whose class the differences could change
    focus_key: str | None = None  # the run last clicked: explanations and exports take it
    layer_map: LayerMap | None = None  # a probed layer shown beside the runs
    _cache: _StudyCache = field(default_factory=_StudyCache, repr=False)

    # Loaded values and layer maps are new when they are other objects (their arrays are
    # never compared).
    events: ClassVar[SignalGroupDescriptor] = SignalGroupDescriptor(
        equality_operators={"loaded": operator.is_, "layer_map": operator.is_},
        signal_aliases=_private,
    )

    def __setattr__(self, name: str, value: Any) -> None:
        check = _CHECKS.get(name)
        super().__setattr__(name, value if check is None else check(self, value))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The fields that have an event (every field but the study's cache)."""
        return tuple(item.name for item in fields(cls) if _private(item.name))

    @contextmanager
    def _together(self, *names: str) -> Iterator[None]:
        """Write the fields ``names`` as one change: their events are emitted once every one
        of them is written, in the order named (listeners never see a half-made state)."""
        with ExitStack() as stack:
            for name in reversed(names):  # resumed last in, first out
                stack.enter_context(self.events[name].paused())
            yield

    # the runs shown ---------------------------------------------------------------------------
    @property
    def runs(self) -> tuple[StudyRun, ...]:
        return self.loaded.runs

    @property
    def records(self) -> Mapping[str, RunRecord]:
        return self.loaded.records

    @property
    def image(self) -> np.ndarray | None:
        return self.loaded.image

    @property
    def image_problem(self) -> InputError | None:
        return self.loaded.image_problem

    @property
    def unreadable(self) -> tuple[InputError, ...]:
        return self.loaded.unreadable

    def set_runs(self, store: RunStore, records: list[RunRecord]) -> None:
        """Show ``records`` (one comparable group), read from ``store``, against the default
        reference and without a probed layer (of other runs)."""
        taken, errors = _read_maps(store, sorted(records, key=natural_order))
        with self._together("loaded", "reference_key", "layer_map"):
            self.loaded = _joined(Loaded(), store, taken, errors)
            self.reference_key = None
            self.layer_map = None

    def add_run(self, store: RunStore, record: RunRecord) -> None:
        """A run finished while the window is open: it appears in its place in the grid."""
        if record.key in self.records:
            return
        if self.runs and record.map_shape != self.runs[0].probabilities.shape:
            return  # not comparable with what is shown
        taken, errors = _read_maps(store, [record])
        self.loaded = _joined(self.loaded, store, taken, errors)

    def add_read_runs(
        self, store: RunStore, read: list[tuple[RunRecord, np.ndarray | None, InputError | None]]
    ) -> None:
        """Runs read elsewhere (a large bundle's, in the background) join the grid, in one
        event for all of them; each is a record with its map, or with why it is unreadable."""
        shape = self.runs[0].probabilities.shape if self.runs else None
        taken: list[tuple[RunRecord, np.ndarray]] = []
        errors: list[InputError] = []
        seen = set(self.records)
        for record, probabilities, error in read:
            if error is not None:
                errors.append(error)
            elif (
                probabilities is not None
                and record.key not in seen
                and (shape is None or probabilities.shape == shape)
            ):
                seen.add(record.key)
                shape = probabilities.shape
                taken.append((record, probabilities))
        self.loaded = _joined(self.loaded, store, taken, errors)

    # answers from the state ------------------------------------------------------------------
    @property
    def study(self) -> GroupAnalysis | None:
        """The runs shown against the reference at the cutoff (None: no runs)."""
        runs = self.loaded.runs
        if not runs:
            return None
        cache = self._cache
        study = cache.study
        if (
            study is None
            or cache.loaded is not self.loaded
            or cache.reference_key != (self.reference_key)
        ):
            reference = next((run for run in runs if run.key == self.reference_key), None)
            exact = self.loaded.exact
            if exact is not None and exact.probabilities.shape != runs[0].probabilities.shape:
                exact = None  # it came first, of another map shape than the runs
            study = GroupAnalysis(runs, self.cutoff, reference, exact=exact)
        elif study.cutoff != self.cutoff:  # keep what the cutoff does not change
            study = study.at_cutoff(self.cutoff)
        cache.study, cache.loaded, cache.reference_key = study, self.loaded, self.reference_key
        return study

    @property
    def reference(self) -> StudyRun | None:
        study = self.study
        return study.reference if study else None

    @property
    def multiclass(self) -> bool:
        return bool(self.runs) and is_multiclass(self.runs[0].probabilities)

    @property
    def class_count(self) -> int:
        shape = self.runs[0].probabilities.shape if self.runs else ()
        return shape[-1] if len(shape) == 3 else 1

    @property
    def focus_run(self) -> StudyRun | None:
        """The run last clicked, unless it is the reference; else the run with most flips."""
        study = self.study
        if study is None or not study.others:
            return None
        chosen = next((run for run in study.others if run.key == self.focus_key), None)
        return chosen or max(study.others, key=study.flip_count)

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
            side: Literal["left", "right"] = "right" if direction > 0 else "left"
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
        """Every run's exact value at a pixel, with its difference and ULPs to the reference
        and, beside an exact run, its ULPs from the exact value and whether its class is the
        exact map's."""
        study = self.study
        if study is None:
            return []
        reference, exact = study.reference, study.exact
        ref_value = np.float32(self.plane(reference)[row, column])
        exact_value = None if exact is None else np.float64(self.plane(exact)[row, column])
        decided = (
            None if exact is None else exact_decisions(self._pixel(exact, row, column), self.cutoff)
        )
        values = []
        for run in study.all_runs:
            wide = np.float64(self.plane(run)[row, column])
            value = np.float32(wide)
            is_exact = exact is not None and run.key == exact.key
            pixel = self._pixel(run, row, column)
            class_index = int(class_map(pixel, self.cutoff)[0, 0])
            right = (
                None
                if decided is None or decided.ties[0, 0]  # tied exactly: no class to be right
                else bool(right_mask(decided, pixel, self.cutoff)[0, 0])
            )
            values.append(
                PixelValue(
                    label=run.label,
                    value=value,
                    text=format_float64(wide) if is_exact else format_float32(value),
                    bits=float64_bits(wide) if is_exact else float32_bits(value),
                    difference=float(wide - np.float64(ref_value)),
                    ulps=int(ulp_distance(np.asarray(ref_value), np.asarray(value))),
                    class_index=class_index,
                    is_reference=run.key == reference.key,
                    key=run.key,
                    exact_ulps=None
                    if exact_value is None
                    else int(ulp_distance(np.asarray(exact_value), np.asarray(value))),
                    right=right,
                    is_exact=is_exact,
                    tied=bool(tie_mask(pixel)[0, 0]),
                )
            )
        return values

    def undecidable(self, row: int, column: int) -> bool:
        """Whether float32 cannot decide the pixel's class (its exact value within 1 float32
        ULP of the cutoff); False without an exact run."""
        study = self.study
        if study is None or study.exact is None:
            return False
        return bool(undecidable_mask(self._pixel(study.exact, row, column), self.cutoff)[0, 0])

    @staticmethod
    def _pixel(run: StudyRun, row: int, column: int) -> np.ndarray:
        """``run``'s map at one pixel, as a 1×1 map (every class)."""
        return run.probabilities[row : row + 1, column : column + 1]


def _read_maps(
    store: RunStore, records: list[RunRecord]
) -> tuple[list[tuple[RunRecord, np.ndarray]], list[InputError]]:
    """Each record with its map, and why each map that could not be read could not."""
    taken: list[tuple[RunRecord, np.ndarray]] = []
    errors: list[InputError] = []
    for record in records:
        try:
            full = store.read_run(record.key)
        except InputError as error:
            errors.append(error)
            continue
        assert full.probabilities is not None
        taken.append((record, full.probabilities))
    return taken, errors


def _joined(
    shown: Loaded,
    store: RunStore,
    taken: list[tuple[RunRecord, np.ndarray]],
    errors: list[InputError],
) -> Loaded:
    """``shown`` with ``taken`` runs each in its place and ``errors`` among the unreadable; the
    target image (the group's) read once, a damaged one said once with the unreadable runs.
    The exact reference (float64) is not one of the float32 runs shown side by side:
    it is a comparison of its own, beside the reference, kept as ``exact`` (the runs' group's,
    as the loader chooses it: :func:`~segdiff_gui.storage.studies.exact_of`)."""
    exacts = {
        record.key: (record, values) for record, values in taken if record.run_config.is_exact
    }
    taken = [(record, values) for record, values in taken if not record.run_config.is_exact]
    records = {**shown.records, **{record.key: record for record, _ in taken}}
    runs = [*shown.runs, *(study_run(record, probabilities) for record, probabilities in taken)]
    runs.sort(key=lambda run: natural_order(records[run.key]))
    exact = shown.exact
    candidates = [record for record, _ in exacts.values()]
    if exact is None and candidates:  # the runs' group's; before any run, the first-come's
        chosen = exact_of(candidates, records[runs[0].key] if runs else candidates[0])
        if chosen is not None:  # its record is none of the runs' records
            exact = study_run(chosen, exacts[chosen.key][1])
    image, problem, unreadable = shown.image, shown.image_problem, [*shown.unreadable, *errors]
    if runs and image is None and problem is None:
        image, problem = target_image(store, records[runs[0].key].target_hash)
        if problem is not None:
            unreadable.append(problem)
    return Loaded(tuple(runs), MappingProxyType(records), image, problem, tuple(unreadable), exact)


def _unit(_model: InspectionModel, value: float) -> float:
    return float(min(max(value, 0.0), 1.0))


def _known_mode(_model: InspectionModel, mode: ViewMode) -> ViewMode:
    if mode not in view_modes.VIEW_MODES:  # the table as it is now
        raise ValueError(f"unknown view mode {mode!r}")
    return mode


def _level_mode(_model: InspectionModel, mode: LevelMode) -> LevelMode:
    if mode not in LEVEL_MODES:
        raise ValueError(f"unknown level mode {mode!r}")
    return mode


def _class_index(_model: InspectionModel, index: int) -> int:
    if index < 0:
        raise ValueError(f"no class {index}")
    return index


def _on_the_maps(model: InspectionModel, pixel: tuple[int, int] | None) -> tuple[int, int] | None:
    if pixel is None:
        return None
    shape = model.runs[0].probabilities.shape if model.runs else (0, 0)
    row, column = pixel
    if not (0 <= row < shape[0] and 0 <= column < shape[1]):
        raise ValueError(f"pixel {pixel} is not on the maps shown ({shape[0]}×{shape[1]})")
    return int(row), int(column)


def _shown_run(model: InspectionModel, key: str | None) -> str | None:
    if key is not None and key not in model.records:
        raise ValueError(f"no run {key!r} is shown")
    return key


# What a write to a field is checked or bounded by (the rest are taken as written).
_CHECKS: dict[str, Callable[[InspectionModel, Any], Any]] = {
    "cutoff": _unit,
    "image_opacity": _unit,
    "mode": _known_mode,
    "level_mode": _level_mode,
    "class_index": _class_index,
    "selected_pixel": _on_the_maps,
    "reference_key": _shown_run,
}
