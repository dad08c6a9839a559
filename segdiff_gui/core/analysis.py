"""Comparing two probability maps: differences, float32 ULP distances, and class flips.

Pure numpy, shared by the CLI and the GUI. The conventions hold everywhere in segdiff:

- A binary map (H×W, one sigmoid channel) assigns the foreground class where ``p >= cutoff``;
  a value exactly at the cutoff is foreground. NaN is never ``>= cutoff``, so it is background.
- A multi-class map (H×W×C) assigns ``argmax`` over the last axis; ties go to the lowest class
  index and a NaN wins (numpy's rules). The cutoff plays no part.
- ULP distances are exact, from the bit patterns: +0 and -0 are 0 apart, neighbouring floats
  (subnormals included) 1 apart, two NaNs 0 apart, and a NaN against a number
  :data:`NAN_ULP`, more than any two finite float32 values can be apart.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "NAN_ULP",
    "MapComparison",
    "class_map",
    "compare_maps",
    "flip_mask",
    "is_multiclass",
    "ordered_float32",
    "signed_difference",
    "ulp_distance",
]

NAN_ULP = 2**32


def ordered_float32(values: np.ndarray) -> np.ndarray:
    """Map float32 bit patterns to int64 so that adjacent floats differ by 1 and ±0 coincide."""
    bits = np.asarray(values, dtype=np.float32).view(np.int32).astype(np.int64)
    ordered: np.ndarray = np.where(bits >= 0, bits, np.int64(-(2**31)) - bits)
    return ordered


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Number of float32 steps between ``a`` and ``b`` as int64 (see the module's rules)."""
    a32 = np.asarray(a, dtype=np.float32)
    b32 = np.asarray(b, dtype=np.float32)
    distance = np.abs(ordered_float32(a32) - ordered_float32(b32))
    a_nan, b_nan = np.isnan(a32), np.isnan(b32)
    result: np.ndarray = np.where(a_nan | b_nan, np.where(a_nan & b_nan, 0, NAN_ULP), distance)
    return result


def signed_difference(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``other - reference`` in float64, so a one-ULP float32 difference is never rounded away."""
    return np.asarray(other, dtype=np.float64) - np.asarray(reference, dtype=np.float64)


def is_multiclass(probabilities: np.ndarray) -> bool:
    return probabilities.ndim == 3 and probabilities.shape[-1] > 1


def class_map(probabilities: np.ndarray, cutoff: float) -> np.ndarray:
    """Class of every pixel: ``p >= cutoff`` for a binary map, argmax for a multi-class one."""
    if is_multiclass(probabilities):
        classes: np.ndarray = np.argmax(probabilities, axis=-1)
        return classes
    binary = probabilities[..., 0] if probabilities.ndim == 3 else probabilities
    # float32 on both sides, as the maps are stored and as flip_curve compares.
    return (np.asarray(binary, dtype=np.float32) >= np.float32(cutoff)).astype(np.uint8)


def flip_mask(reference: np.ndarray, other: np.ndarray, cutoff: float) -> np.ndarray:
    """Boolean H×W mask of the pixels whose class differs between the two maps."""
    mask: np.ndarray = class_map(reference, cutoff) != class_map(other, cutoff)
    return mask


@dataclass(frozen=True)
class MapComparison:
    """How one map differs from a reference map of the same shape.

    ``differing_pixels`` counts pixels with any ULP difference or a NaN on one side only (a
    multi-class pixel once); ``bitwise_equal`` is stricter: every bit the same (so +0 against
    -0 is not). ``max_ulp``, ``max_abs`` and ``mean_abs`` cover the pixels that are numbers
    in both maps; ``nan_mismatches`` counts the values that are NaN in one map only.
    ``max_location`` is the (row, column[, class]) of the largest |difference|, ``None`` when
    no number differs.
    """

    pixels: int
    differing_pixels: int
    bitwise_equal: bool
    max_ulp: int
    max_abs: float
    mean_abs: float
    max_location: tuple[int, ...] | None
    nan_mismatches: int
    flips: int
    cutoff: float

    @property
    def differing_fraction(self) -> float:
        return self.differing_pixels / self.pixels if self.pixels else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "differing_fraction": self.differing_fraction}


def compare_maps(reference: np.ndarray, other: np.ndarray, cutoff: float = 0.5) -> MapComparison:
    """Compare ``other`` with ``reference`` (same shape): differences, ULPs and flips."""
    if reference.shape != other.shape:
        raise ValueError(f"maps differ in shape: {reference.shape} vs {other.shape}")
    ref = np.asarray(reference, dtype=np.float32)
    oth = np.asarray(other, dtype=np.float32)
    ulps = ulp_distance(ref, oth)
    nan_mismatch = ulps == NAN_ULP
    numeric_ulps = np.where(nan_mismatch, 0, ulps)  # NaNs are counted apart
    abs_diff = np.abs(signed_difference(ref, oth))
    finite = np.where(np.isnan(abs_diff), -1.0, abs_diff)
    per_pixel = (ulps > 0).any(axis=-1) if is_multiclass(ref) else ulps > 0
    largest = int(np.argmax(finite)) if finite.size else 0
    location = (
        tuple(int(i) for i in np.unravel_index(largest, finite.shape))
        if finite.size and finite.flat[largest] > 0
        else None
    )
    valid = abs_diff[~np.isnan(abs_diff)]
    return MapComparison(
        pixels=int(per_pixel.size),
        differing_pixels=int(np.count_nonzero(per_pixel)),
        bitwise_equal=ref.tobytes() == oth.tobytes(),
        max_ulp=int(numeric_ulps.max(initial=0)),
        max_abs=float(valid.max(initial=0.0)),
        mean_abs=float(valid.mean()) if valid.size else 0.0,
        max_location=location,
        nan_mismatches=int(np.count_nonzero(nan_mismatch)),
        flips=int(np.count_nonzero(flip_mask(ref, oth, cutoff))),
        cutoff=cutoff,
    )
