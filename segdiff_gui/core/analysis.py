"""Comparison of probability maps: bitwise equality, ULP distance, differences and class flips.

Pure numpy. Binary maps (H×W) assign the foreground class where ``p >= cutoff``; multi-class
maps (H×W×C) assign ``argmax`` over the last axis, ties going to the lowest class index (numpy's
rule), everywhere in segdiff.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MapComparison", "class_map", "compare_maps", "ordered_float32", "ulp_distance"]


def ordered_float32(values: np.ndarray) -> np.ndarray:
    """Map float32 bit patterns to int64 so that adjacent floats differ by 1 and ±0 coincide."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.int32).astype(np.int64)
    ordered: np.ndarray = np.where(bits >= 0, bits, np.int64(-(2**31)) - bits)
    return ordered


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Number of float32 steps between ``a`` and ``b`` (0 for +0 vs -0), as int64."""
    distance: np.ndarray = np.abs(ordered_float32(a) - ordered_float32(b))
    return distance


def class_map(probabilities: np.ndarray, cutoff: float) -> np.ndarray:
    """Class of every pixel: ``p >= cutoff`` for a binary map, argmax for a multi-class one."""
    if probabilities.ndim == 3 and probabilities.shape[-1] > 1:
        classes: np.ndarray = np.argmax(probabilities, axis=-1)
        return classes
    binary = probabilities[..., 0] if probabilities.ndim == 3 else probabilities
    return (binary >= np.float32(cutoff)).astype(np.uint8)


@dataclass(frozen=True)
class MapComparison:
    """How one map differs from a reference map of the same shape."""

    pixels: int
    differing_pixels: int
    max_ulp: int
    max_abs: float
    mean_abs: float
    flips: int
    cutoff: float

    @property
    def bitwise_equal(self) -> bool:
        return self.differing_pixels == 0


def compare_maps(reference: np.ndarray, other: np.ndarray, cutoff: float = 0.5) -> MapComparison:
    """Compare two float32 maps: differing pixels count a pixel once even with several classes."""
    if reference.shape != other.shape:
        raise ValueError(f"maps differ in shape: {reference.shape} vs {other.shape}")
    ref = np.asarray(reference, dtype=np.float32)
    oth = np.asarray(other, dtype=np.float32)
    ulps = ulp_distance(ref, oth)
    abs_diff = np.abs(oth.astype(np.float64) - ref.astype(np.float64))
    # A pixel of a multi-class map differs when any of its classes does.
    differs = np.asarray((ulps > 0).any(axis=-1) if ref.ndim == 3 else ulps > 0)
    flips = class_map(ref, cutoff) != class_map(oth, cutoff)
    return MapComparison(
        pixels=int(differs.size),
        differing_pixels=int(np.count_nonzero(differs)),
        max_ulp=int(ulps.max(initial=0)),
        max_abs=float(abs_diff.max(initial=0.0)),
        mean_abs=float(abs_diff.mean()) if abs_diff.size else 0.0,
        flips=int(np.count_nonzero(flips)),
        cutoff=cutoff,
    )
