"""How many pixels flip class as a function of the cutoff, for the whole range at once.

A binary pixel flips at cutoff ``t`` exactly when ``(a >= t) != (b >= t)``, that is when
``lo < t <= hi`` with ``lo = min(a, b)`` and ``hi = max(a, b)``. So the number of flips at ``t``
is ``#{lo < t} - #{hi < t}``: two sorted arrays answer every cutoff by binary search, with no
re-thresholding. NaN is treated as below every cutoff, as :func:`class_map` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from segdiff_gui.core.analysis import is_multiclass
from segdiff_gui.core.parallel import thread_map

__all__ = ["FlipCurve", "flip_curve"]

DEFAULT_POINTS = 1001


@dataclass(frozen=True)
class FlipCurve:
    """Flip counts at ``cutoffs``; :meth:`at` answers any other cutoff exactly."""

    cutoffs: np.ndarray
    flips: np.ndarray
    lows: np.ndarray
    highs: np.ndarray

    def at(self, cutoff: float | np.ndarray) -> np.ndarray:
        t = np.asarray(cutoff, dtype=np.float32)
        counts: np.ndarray = np.searchsorted(self.lows, t, side="left") - np.searchsorted(
            self.highs, t, side="left"
        )
        return counts


def flip_curve(
    reference: np.ndarray, other: np.ndarray, cutoffs: np.ndarray | None = None
) -> FlipCurve:
    """Flip counts over ``cutoffs`` (default 1001 points over [0, 1]) for binary maps.

    Multi-class maps flip on argmax, which no cutoff changes: they raise ``ValueError``.
    """
    if is_multiclass(reference):
        raise ValueError("multi-class maps flip on argmax; a cutoff curve does not apply")
    if reference.shape != other.shape:
        raise ValueError(f"maps differ in shape: {reference.shape} vs {other.shape}")
    a = np.asarray(reference, dtype=np.float32).ravel()
    b = np.asarray(other, dtype=np.float32).ravel()
    a = np.where(np.isnan(a), -np.inf, a)
    b = np.where(np.isnan(b), -np.inf, b)
    differs = a != b  # equal pixels can never flip: leave them out of the sort
    a, b = a[differs], b[differs]
    # The two sorts are most of the time and numpy releases the GIL while sorting: side by side.
    lows, highs = thread_map(np.sort, (np.minimum(a, b), np.maximum(a, b)))
    grid = np.linspace(0.0, 1.0, DEFAULT_POINTS) if cutoffs is None else np.asarray(cutoffs)
    curve = FlipCurve(grid, np.zeros(0, dtype=np.int64), lows, highs)
    return FlipCurve(grid, curve.at(grid), lows, highs)
