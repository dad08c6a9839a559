"""Spread over repeats (is a configuration deterministic?) and pixels at risk at a cutoff.

A pixel is *at risk* when its reference value lies closer to the cutoff than the largest
difference any run showed from the reference (the *margin*): the variation actually observed
could move it across. For multi-class maps the same holds for the gap between the two largest
class probabilities, which a change of ``margin`` in each can close from both sides.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from segdiff_gui.core.analysis import is_multiclass, signed_difference, ulp_distance

__all__ = ["RepeatVerdict", "at_risk_mask", "observed_margin", "repeat_verdict", "spread"]


def spread(maps: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel (per-class) minimum and maximum over ``maps``, ignoring NaN where a number
    exists (a value that is NaN in every map stays NaN)."""
    stack = np.stack([np.asarray(m, dtype=np.float32) for m in maps])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels: NaN is the answer
        return np.nanmin(stack, axis=0), np.nanmax(stack, axis=0)


@dataclass(frozen=True)
class RepeatVerdict:
    """Whether repeats of one configuration agree bit for bit, and if not, by how much.

    ``max_spread`` and ``max_ulp`` measure max − min per pixel; ``varying_pixels`` counts
    pixels whose value (or NaN-ness) differs between repeats.
    """

    repeats: int
    deterministic: bool
    max_spread: float
    max_ulp: int
    varying_pixels: int
    nan_pixels: int

    def sentence(self) -> str:
        if self.deterministic:
            return f"bitwise deterministic over {self.repeats} repeats"
        if self.varying_pixels == 0:
            return (
                f"not bitwise identical over {self.repeats} repeats, but equal in value "
                "(only the signs of zeros or NaN payloads differ)"
            )
        nans = f"; {self.nan_pixels:,} of them NaN in some repeats only" if self.nan_pixels else ""
        return (
            f"nondeterministic: max spread {self.max_spread:.3g} ({self.max_ulp:,} ULP), "
            f"{self.varying_pixels:,} pixels vary over {self.repeats} repeats{nans}"
        )


def repeat_verdict(maps: Sequence[np.ndarray]) -> RepeatVerdict:
    stack = np.stack([np.asarray(m, dtype=np.float32) for m in maps])
    low, high = spread(maps)
    nan_count = np.isnan(stack).sum(axis=0)
    partly_nan = (nan_count > 0) & (nan_count < len(maps))
    ulps = np.where(np.isnan(low), 0, ulp_distance(low, high))
    varies = (ulps > 0) | partly_nan
    if is_multiclass(stack[0]):
        varies, partly_nan = varies.any(axis=-1), partly_nan.any(axis=-1)
    width = signed_difference(low, high)
    return RepeatVerdict(
        repeats=len(maps),
        deterministic=all(stack[0].tobytes() == other.tobytes() for other in stack[1:]),
        max_spread=float(np.nanmax(width, initial=0.0)),
        max_ulp=int(ulps.max(initial=0)),
        varying_pixels=int(np.count_nonzero(varies)),
        nan_pixels=int(np.count_nonzero(partly_nan)),
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
