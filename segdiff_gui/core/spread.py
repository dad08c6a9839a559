"""Spread over repeats (is a configuration deterministic?) and pixels at risk at a cutoff.

A pixel is *at risk* when its reference value lies closer to the cutoff than the largest
difference any run showed from the reference (the *margin*): the variation actually observed
could move it across. For multi-class maps the same holds for the gap between the two largest
class probabilities, which a change of ``margin`` in each can close from both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from segdiff_gui.core.analysis import NAN_ULP, is_multiclass, signed_difference, ulp_distance

__all__ = ["RepeatVerdict", "at_risk_mask", "observed_margin", "repeat_verdict", "spread"]


def spread(maps: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel (per-class) minimum and maximum over ``maps``."""
    stack = np.stack([np.asarray(m, dtype=np.float32) for m in maps])
    return stack.min(axis=0), stack.max(axis=0)


@dataclass(frozen=True)
class RepeatVerdict:
    """Whether repeats of one configuration agree bit for bit, and if not, by how much."""

    repeats: int
    deterministic: bool
    max_spread: float
    max_ulp: int
    varying_pixels: int

    def sentence(self) -> str:
        if self.deterministic:
            return f"bitwise deterministic over {self.repeats} repeats"
        return (
            f"nondeterministic: max spread {self.max_spread:.3g} ({self.max_ulp:,} ULP), "
            f"{self.varying_pixels:,} pixels vary over {self.repeats} repeats"
        )


def repeat_verdict(maps: Sequence[np.ndarray]) -> RepeatVerdict:
    first = np.asarray(maps[0], dtype=np.float32)
    ulps = np.zeros(first.shape, dtype=np.int64)
    for other in maps[1:]:
        ulps = np.maximum(ulps, ulp_distance(first, other))
    per_pixel = ulps.max(axis=-1) if is_multiclass(first) else ulps
    low, high = spread(maps)
    width = signed_difference(low, high)
    finite = width[np.isfinite(width)]
    return RepeatVerdict(
        repeats=len(maps),
        deterministic=all(first.tobytes() == np.asarray(m, np.float32).tobytes() for m in maps),
        max_spread=float(finite.max(initial=0.0)),
        max_ulp=int(min(per_pixel.max(initial=0), NAN_ULP)),
        varying_pixels=int(np.count_nonzero(per_pixel)),
    )


def observed_margin(reference: np.ndarray, others: Sequence[np.ndarray]) -> float:
    """The largest |difference| from the reference that any run showed (NaNs ignored)."""
    margin = 0.0
    for other in others:
        diff = np.abs(signed_difference(reference, other))
        margin = max(margin, float(np.nanmax(diff, initial=0.0)))
    return margin


def at_risk_mask(reference: np.ndarray, margin: float, cutoff: float) -> np.ndarray:
    """Pixels whose class at ``cutoff`` could change under a difference of ``margin``."""
    ref = np.asarray(reference, dtype=np.float64)
    if margin <= 0:  # no run differed at all: nothing observed can move a pixel
        return np.zeros(ref.shape[:2], dtype=bool)
    if is_multiclass(ref):
        top_two = np.sort(ref, axis=-1)[..., -2:]
        gap_closes: np.ndarray = (top_two[..., 1] - top_two[..., 0]) <= 2 * margin
        return gap_closes
    values = ref[..., 0] if ref.ndim == 3 else ref
    # Compare with the float32 cutoff that class_map uses, in float64 so nothing rounds.
    near: np.ndarray = np.abs(values - np.float64(np.float32(cutoff))) <= margin
    return near
