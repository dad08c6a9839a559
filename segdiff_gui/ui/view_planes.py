"""What each view draws for the current mode, and at which levels (Qt-free).

Probability views share fixed levels [0, 1]. Difference and ULP views share one symmetric (or
log) scale by default, set by the largest difference of any run; with ``per view`` levels each
view is scaled to its own largest difference, so a batch run's 1e-7 differences show beside a
bfloat16 run's 1e-2 (each view's title then says its scale, and the colour bar is relative).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from segdiff_gui.core.analysis import difference_map, ulp_distance
from segdiff_gui.core.study import StudyRun
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["LEVEL_MODES", "ViewPlanes", "view_planes"]

LEVEL_MODES = ("shared", "per view")


@dataclass(frozen=True)
class ViewPlanes:
    planes: dict[str, np.ndarray]  # by run key: floats, or class indices as bytes
    levels: dict[str, tuple[float, float]]  # by run key: the levels its view is drawn at
    bar: tuple[float, float]  # what the colour bar shows
    bar_label: str | None
    scale_text: dict[str, str]  # by run key: its own scale, for its title (per-view levels)


def _largest(plane: np.ndarray) -> float:
    return float(np.nanmax(np.abs(plane), initial=0.0))


def view_planes(model: InspectionModel, reference: StudyRun) -> ViewPlanes:
    runs = model.runs
    ref_plane = model.plane(reference)
    per_view = model.level_mode == "per view"
    if model.mode == "probability":
        planes = {run.key: model.plane(run) for run in runs}
        return ViewPlanes(planes, dict.fromkeys(planes, (0.0, 1.0)), (0.0, 1.0), None, {})
    if model.mode == "flips":
        # Class indices as bytes (the lookup table colours them); no float copy of each map.
        study = model.study
        assert study is not None  # a reference exists, so a study does
        study.flips_of(study.others)  # the masks side by side; each view's classes from them
        classes = {run.key: study.classes(run) for run in runs}
        levels = (0.0, float(max(1, model.class_count - 1)))
        return ViewPlanes(classes, dict.fromkeys(classes, levels), levels, None, {})
    if model.mode == "difference":
        planes = {run.key: difference_map(ref_plane, model.plane(run)) for run in runs}
        largest = {key: _largest(plane) for key, plane in planes.items()}
        own = {key: value or 1e-9 for key, value in largest.items()}
        shared = max(own.values(), default=1e-9)
        if per_view:
            levels = {key: (-limit, limit) for key, limit in own.items()}
            texts = {
                key: f"±{value:.2g}" if value else "= ref"
                for key, value in largest.items()
                if key != reference.key
            }
            return ViewPlanes(planes, levels, (-1.0, 1.0), "Δ / each view's ±max", texts)
        return ViewPlanes(planes, dict.fromkeys(planes, (-shared, shared)), (-shared, shared),
                          None, {})  # fmt: skip
    # ULP distances on a log scale: 1-ULP changes are visible.
    planes = {
        run.key: np.log10(1.0 + ulp_distance(ref_plane, model.plane(run))).astype(np.float32)
        for run in runs
    }
    largest = {key: float(plane.max(initial=0.0)) for key, plane in planes.items()}
    own = {key: value or 1.0 for key, value in largest.items()}
    label = "log10(1 + ULP distance)"
    if per_view:
        levels = {key: (0.0, top) for key, top in own.items()}
        texts = {
            key: f"≤{10**top - 1:,.0f} ULP" if top else "= ref"
            for key, top in largest.items()
            if key != reference.key
        }
        return ViewPlanes(planes, levels, (0.0, 1.0), f"{label} / each view's max", texts)
    top = max(own.values(), default=1.0)
    return ViewPlanes(planes, dict.fromkeys(planes, (0.0, top)), (0.0, top), label, {})
