"""How each view mode computes what its views draw, and at which levels (Qt-free). Each
function is one row's ``planes`` in ``view_modes.VIEW_MODES``.

Probability views share fixed levels [0, 1] by default; with ``per view`` levels each map
spans its own range, so a near-constant map shows its structure rather than one flat colour.
Difference and ULP views share one symmetric (or log) scale by default, set by the largest
difference of any run; with ``per view`` levels each view is scaled to its own largest
difference, so a batch run's 1e-7 differences show beside a bfloat16 run's 1e-2. Per view,
each view's title says its scale, and the colour bar is relative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from segdiff_gui.core.analysis import difference_map, ulp_distance
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.study import GroupAnalysis, StudyRun

__all__ = [
    "LEVEL_MODES",
    "LevelMode",
    "PlaneSource",
    "ViewPlanes",
    "difference_planes",
    "exact_error_planes",
    "flip_planes",
    "probability_planes",
    "ulp_planes",
]

LevelMode = Literal["shared", "per view"]
LEVEL_MODES: tuple[LevelMode, ...] = ("shared", "per view")


class PlaneSource(Protocol):
    """What a mode's planes are computed from: the inspection model, as far as they read it."""

    @property
    def runs(self) -> Sequence[StudyRun]: ...

    @property
    def study(self) -> GroupAnalysis | None: ...

    @property
    def class_count(self) -> int: ...

    @property
    def level_mode(self) -> LevelMode: ...

    def plane(self, run: StudyRun) -> np.ndarray: ...


@dataclass(frozen=True)
class ViewPlanes:
    planes: dict[str, np.ndarray]  # by run key: floats, or class indices as bytes
    levels: dict[str, tuple[float, float]]  # by run key: the levels its view is drawn at
    bar: tuple[float, float]  # what the colour bar shows
    bar_label: str | None
    scale_text: dict[str, str]  # by run key: its own scale, for its title (per-view levels)


def _largest(plane: np.ndarray) -> float:
    return float(np.nanmax(np.abs(plane), initial=0.0))


def probability_planes(source: PlaneSource, reference: StudyRun) -> ViewPlanes:
    """The maps themselves (the chosen class of a multi-class one), levels fixed to [0, 1]
    (shared), or each map's own range, from its least to its largest value (per view)."""
    planes = {run.key: source.plane(run) for run in source.runs}
    if source.level_mode == "per view":
        ranges = {key: _range(plane) for key, plane in planes.items()}
        texts = {key: _range_text(low, high) for key, (low, high) in ranges.items()}
        label = "p / each view's own range (0 its least, 1 its largest)"
        return ViewPlanes(planes, ranges, (0.0, 1.0), label, texts)
    return ViewPlanes(planes, dict.fromkeys(planes, (0.0, 1.0)), (0.0, 1.0), "p, 0 to 1", {})


def _range_text(low: float, high: float) -> str:
    """``low … high`` in as few digits as tell them apart (a title is short: ``1.2e-08 … 1``,
    ``0.4999997 … 0.5000003``)."""
    if not high > low:
        return f"= {format_float32(low)} everywhere"
    for digits in range(2, 10):
        low_text, high_text = f"{low:.{digits}g}", f"{high:.{digits}g}"
        if low_text != high_text:
            break
    return f"{low_text} … {high_text}"


def _range(plane: np.ndarray) -> tuple[float, float]:
    """The least and the largest value of ``plane`` that are numbers ((0, 1) if none is)."""
    finite = plane[np.isfinite(plane)]
    if finite.size == 0:
        return 0.0, 1.0
    return float(finite.min()), float(finite.max())


def flip_planes(source: PlaneSource, reference: StudyRun) -> ViewPlanes:
    """Every pixel's class at the cutoff, as bytes (the class colours' table colours them; no
    float copy of each map)."""
    study = source.study
    assert study is not None  # a reference exists, so a study does
    study.flips_of(study.others)  # the masks side by side; each view's classes from them
    classes = {run.key: study.classes(run) for run in source.runs}
    levels = (0.0, float(max(1, source.class_count - 1)))
    return ViewPlanes(classes, dict.fromkeys(classes, levels), levels, None, {})


def difference_planes(source: PlaneSource, reference: StudyRun) -> ViewPlanes:
    """Each run minus the reference, at symmetric levels: shared, or each view's own."""
    ref_plane = source.plane(reference)
    planes = {run.key: difference_map(ref_plane, source.plane(run)) for run in source.runs}
    return _symmetric(source, planes, reference.key, "= ref", ("Δ", None))


def exact_error_planes(source: PlaneSource, reference: StudyRun) -> ViewPlanes:
    """Each run minus the exact (float64) map, the error of its float32 (the difference taken
    in float64, shown as float32), at symmetric levels; all transparent without an exact
    run, the colour bar saying so."""
    study = source.study
    exact = study.exact if study is not None else None
    if exact is None:
        shape = reference.probabilities.shape[:2]
        planes = {run.key: np.full(shape, np.nan, np.float32) for run in source.runs}
        texts = dict.fromkeys(planes, "no exact run")
        label = "no exact run: add precision=float64"
        return ViewPlanes(planes, dict.fromkeys(planes, (-1.0, 1.0)), (-1.0, 1.0), label, texts)
    exact_plane = np.asarray(source.plane(exact), dtype=np.float64)
    planes = {
        run.key: (np.asarray(source.plane(run), dtype=np.float64) - exact_plane).astype(np.float32)
        for run in source.runs
    }
    return _symmetric(source, planes, exact.key, "= exact", ("Δ from exact", "Δ from exact"))


def _symmetric(
    source: PlaneSource,
    planes: dict[str, np.ndarray],
    zero_key: str,
    same: str,
    what: tuple[str, str | None],
) -> ViewPlanes:
    """Signed ``planes`` at symmetric levels, shared or each view's own (then each view's
    title says its scale, ``same`` where it is all 0; none for ``zero_key``'s view).
    ``what`` names the values on the colour bar: per view, and shared (None: unnamed)."""
    largest = {key: _largest(plane) for key, plane in planes.items()}
    own = {key: value or 1e-9 for key, value in largest.items()}
    if source.level_mode == "per view":
        levels = {key: (-limit, limit) for key, limit in own.items()}
        texts = {
            key: f"±{value:.2g}" if value else same
            for key, value in largest.items()
            if key != zero_key
        }
        return ViewPlanes(planes, levels, (-1.0, 1.0), f"{what[0]} / each view's ±max", texts)
    shared = max(own.values(), default=1e-9)
    bar = (-shared, shared)
    return ViewPlanes(planes, dict.fromkeys(planes, bar), bar, what[1], {})


def ulp_planes(source: PlaneSource, reference: StudyRun) -> ViewPlanes:
    """ULP distances to the reference on a log scale, so 1-ULP changes are visible."""
    ref_plane = source.plane(reference)
    planes = {
        run.key: np.log10(1.0 + ulp_distance(ref_plane, source.plane(run))).astype(np.float32)
        for run in source.runs
    }
    largest = {key: float(plane.max(initial=0.0)) for key, plane in planes.items()}
    own = {key: value or 1.0 for key, value in largest.items()}
    label = "log10(1 + ULP distance)"
    if source.level_mode == "per view":
        levels = {key: (0.0, top) for key, top in own.items()}
        texts = {
            key: f"≤{10**top - 1:,.0f} ULP" if top else "= ref"
            for key, top in largest.items()
            if key != reference.key
        }
        return ViewPlanes(planes, levels, (0.0, 1.0), f"{label} / each view's max", texts)
    top = max(own.values(), default=1.0)
    return ViewPlanes(planes, dict.fromkeys(planes, (0.0, top)), (0.0, top), label, {})
