"""Comparing two probability maps: differences, float32 ULP distances, and class flips.

Pure numpy, shared by the CLI and the GUI. The conventions hold everywhere in segdiff:

- A binary map (H×W, one sigmoid channel) assigns the foreground class where ``p >= cutoff``;
  a value exactly at the cutoff is foreground. NaN is never ``>= cutoff``, so it is background.
- A multi-class map (H×W×C) assigns ``argmax`` over the last axis; ties go to the lowest class
  index and a NaN wins (numpy's rules). The cutoff plays no part. A pixel whose largest
  classes are exactly equal is *tied* (a bfloat16 map can round three classes to one value):
  argmax's lowest class is no class decision, so a pixel tied in either map is counted as a
  tie, never as a flip.
- ULP distances are exact, from the bit patterns: +0 and -0 are 0 apart, neighbouring floats
  (subnormals included) 1 apart, two NaNs 0 apart, and a NaN against a number
  :data:`NAN_ULP`, more than any two finite float32 values can be apart.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.floatfmt import format_float32

__all__ = [
    "NAN_ULP",
    "MapComparison",
    "at_cutoff",
    "binary_classes_into",
    "class_map",
    "compare_maps",
    "difference_map",
    "flip_mask",
    "flips_heading",
    "is_multiclass",
    "row_blocks",
    "ordered_float32",
    "signed_difference",
    "tie_mask",
    "ulp_distance",
]

NAN_ULP = 2**32

# Rows per block are chosen so one block of float32 values is about this many bytes: the
# block's int64 and float64 temporaries then stay in cache, and an 8192×8192 comparison needs
# megabytes of scratch instead of gigabytes.
_BLOCK_BYTES = 2**18


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


def difference_map(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``other - reference`` as float32: the map that views, histograms and report images show.

    IEEE subtraction is correctly rounded, so this is the exact difference rounded once to
    float32. It is exact whenever the two values are within a factor of two of each other
    (Sterbenz), which covers one-ULP and device differences, and it is never 0 for two
    different numbers. Figures that must be exact to the last digit (max |Δ|, mean |Δ|) come
    from :func:`signed_difference` instead; this one is a plain float32 pass, several times
    faster than widening both maps.
    """
    return np.subtract(np.asarray(other, dtype=np.float32), np.asarray(reference, dtype=np.float32))


def is_multiclass(probabilities: np.ndarray) -> bool:
    return multiclass_shape(probabilities.shape)


def multiclass_shape(shape: tuple[int, ...]) -> bool:
    """Whether a map of ``shape`` holds classes (softmax): one value per class per pixel."""
    return len(shape) == 3 and shape[-1] > 1


def at_cutoff(cutoff: float, multiclass: bool) -> str:
    """Where the classes were decided, in words: ``at cutoff 0.5500041`` (the float32 the
    flips are counted at), or ``at argmax`` for a multi-class map."""
    return "at argmax" if multiclass else f"at cutoff {format_float32(cutoff)}"


def flips_heading(cutoff: float, multiclass: bool) -> str:
    """A column of flip counts: ``flips @ 0.5500041``, or ``class flips (argmax)``."""
    return "class flips (argmax)" if multiclass else f"flips @ {format_float32(cutoff)}"


def class_map(probabilities: np.ndarray, cutoff: float) -> np.ndarray:
    """Class of every pixel: ``p >= cutoff`` for a binary map, argmax for a multi-class one."""
    if is_multiclass(probabilities):
        classes: np.ndarray = np.argmax(probabilities, axis=-1)
        return classes
    classes = np.empty(probabilities.shape[:2], dtype=np.uint8)
    binary_classes_into(probabilities, cutoff, classes)
    return classes


def binary_classes_into(probabilities: np.ndarray, cutoff: float, out: np.ndarray) -> None:
    """Write a binary map's classes (``p >= cutoff``: 0 and 1, NaN as 0) into the bytes
    ``out``, of the map's height and width (or a block's rows of both).

    The cutoff is always its float32. A float32 map is compared in float32, as the maps are
    stored and as flip_curve compares; the exact (float64) map keeps its own values, against
    the float32 cutoff widened exactly (core/exact.py): rounding them first would give the
    cutoff's class to an exact value just below it."""
    binary = probabilities[..., 0] if probabilities.ndim == 3 else probabilities
    dtype = np.float64 if binary.dtype == np.float64 else np.float32
    # The bool result written straight into the bytes (0 and 1 already), no temporary.
    np.greater_equal(
        np.asarray(binary, dtype=dtype), dtype(np.float32(cutoff)), out=out.view(np.bool_)
    )


def tie_mask(probabilities: np.ndarray) -> np.ndarray:
    """H×W: pixels of a multi-class map whose largest value is shared by two classes or more
    (all ``False`` for a binary map, which has a cutoff and no argmax)."""
    if not is_multiclass(probabilities):
        return np.zeros(probabilities.shape[:2] if probabilities.ndim > 1 else probabilities.shape,
                        dtype=bool)  # fmt: skip
    top = probabilities.max(axis=-1, keepdims=True)
    tied: np.ndarray = np.count_nonzero(probabilities == top, axis=-1) > 1
    return tied


def flip_mask(reference: np.ndarray, other: np.ndarray, cutoff: float) -> np.ndarray:
    """Boolean H×W mask of the pixels whose class differs between the two maps (a pixel tied
    in either multi-class map is a tie, not a flip)."""
    mask = np.empty(reference.shape[:2] if reference.ndim > 1 else reference.shape, dtype=bool)
    multiclass = is_multiclass(reference)
    # Row blocks: the two class maps of a block stay in cache, and the mask is the only
    # allocation the size of the map.
    for block in row_blocks(reference):
        np.not_equal(class_map(reference[block], cutoff), class_map(other[block], cutoff),
                     out=mask[block])  # fmt: skip
        if multiclass:
            mask[block] &= ~(tie_mask(reference[block]) | tie_mask(other[block]))
    return mask


def row_blocks(values: np.ndarray) -> list[slice]:
    """Slices of whole rows, each about :data:`_BLOCK_BYTES` of ``values``."""
    per_row = values[:1].nbytes or 1
    step = max(1, _BLOCK_BYTES // per_row)
    return [slice(start, start + step) for start in range(0, len(values), step)]


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
    ties: int = 0  # multi-class pixels tied in either map (counted apart from flips)

    @property
    def differing_fraction(self) -> float:
        return self.differing_pixels / self.pixels if self.pixels else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "differing_fraction": self.differing_fraction}


def compare_maps(
    reference: np.ndarray, other: np.ndarray, cutoff: float = DEFAULT_CUTOFF
) -> MapComparison:
    """Compare ``other`` with ``reference`` (same shape): differences, ULPs and flips."""
    if reference.shape != other.shape:
        raise ValueError(f"maps differ in shape: {reference.shape} vs {other.shape}")
    ref = np.asarray(reference, dtype=np.float32)
    oth = np.asarray(other, dtype=np.float32)
    total = _Totals()
    values_per_row = int(np.prod(ref.shape[1:]))  # 1 for a 1-D array
    for block in row_blocks(ref):
        total.add(ref[block], oth[block], cutoff, first_index=block.start * values_per_row)
    location = None
    if total.max_abs_index >= 0 and total.max_abs > 0:
        location = tuple(int(i) for i in np.unravel_index(total.max_abs_index, ref.shape))
    return MapComparison(
        pixels=int(np.prod(ref.shape[:-1])) if is_multiclass(ref) else int(ref.size),
        differing_pixels=total.differing_pixels,
        bitwise_equal=total.bitwise_equal,
        max_ulp=total.max_ulp,
        max_abs=total.max_abs,
        mean_abs=total.sum_abs / total.numbers if total.numbers else 0.0,
        max_location=location,
        nan_mismatches=total.nan_mismatches,
        flips=total.flips,
        cutoff=cutoff,
        ties=total.ties,
    )


@dataclass
class _Totals:
    """What :func:`compare_maps` gathers block by block (row blocks, in order)."""

    differing_pixels: int = 0
    bitwise_equal: bool = True
    max_ulp: int = 0
    max_abs: float = 0.0
    max_abs_index: int = -1  # flat index of the first largest |difference|; -1 while none
    sum_abs: float = 0.0
    numbers: int = 0  # values that are numbers in both maps
    nan_mismatches: int = 0
    flips: int = 0
    ties: int = 0

    def add(self, ref: np.ndarray, oth: np.ndarray, cutoff: float, first_index: int) -> None:
        ref_bits, oth_bits = ref.view(np.int32), oth.view(np.int32)
        if self.bitwise_equal:
            self.bitwise_equal = bool(np.array_equal(ref_bits, oth_bits))
        self.flips += int(np.count_nonzero(flip_mask(ref, oth, cutoff)))
        if is_multiclass(ref):
            self.ties += int(np.count_nonzero(tie_mask(ref) | tie_mask(oth)))
        # Probability maps are almost always finite numbers with the sign bit clear; then the
        # float32 bit patterns are already in order and a difference of them counts ULPs, with
        # no int64 widening. Anything else (NaN, infinities, negatives, -0) goes the general way.
        if min(ref_bits.min(initial=0), oth_bits.min(initial=0)) < 0 or not _all_finite(ref, oth):
            self._add_general(ref, oth, first_index)
            return
        steps = ref_bits - oth_bits  # cannot overflow: both are in [0, 2**31)
        if steps.size:
            self.max_ulp = max(self.max_ulp, int(steps.max()), -int(steps.min()))
        self._count_differing(steps != 0, ref)
        self._add_abs(np.abs(signed_difference(ref, oth)), first_index)

    def _add_general(self, ref: np.ndarray, oth: np.ndarray, first_index: int) -> None:
        ulps = ulp_distance(ref, oth)
        nan_mismatch = ulps == NAN_ULP
        self.nan_mismatches += int(np.count_nonzero(nan_mismatch))
        self.max_ulp = max(self.max_ulp, int(np.where(nan_mismatch, 0, ulps).max(initial=0)))
        self._count_differing(ulps > 0, ref)
        with np.errstate(invalid="ignore"):  # inf - inf is NaN: not a pair of numbers
            abs_diff = np.abs(signed_difference(ref, oth))
        self._add_abs(np.where(np.isnan(abs_diff), -1.0, abs_diff), first_index)

    def _count_differing(self, differs: np.ndarray, ref: np.ndarray) -> None:
        """A multi-class pixel differs once, however many of its classes do."""
        per_pixel = differs.any(axis=-1) if is_multiclass(ref) else differs
        self.differing_pixels += int(np.count_nonzero(per_pixel))

    def _add_abs(self, abs_diff: np.ndarray, first_index: int) -> None:
        """Fold in |differences|, with -1 standing for a pair that is not two numbers."""
        numbers = abs_diff[abs_diff >= 0] if abs_diff.min(initial=0) < 0 else abs_diff
        self.numbers += numbers.size
        self.sum_abs += float(numbers.sum())
        if numbers.size:
            largest = int(np.argmax(abs_diff))
            if abs_diff.flat[largest] > self.max_abs:  # strictly: the first largest is kept
                self.max_abs = float(abs_diff.flat[largest])
                self.max_abs_index = first_index + largest


def _all_finite(*arrays: np.ndarray) -> bool:
    return all(bool(np.isfinite(a).all()) for a in arrays)
