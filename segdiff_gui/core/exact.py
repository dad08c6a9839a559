"""Which answer is right: float32 runs against the exact (float64) map of the same model.

A float64 computation of the model (``precision=float64``: the float32 weights and inputs
widened exactly, every layer in float64) errs from the true value by about 1e-16 relative
(a few float64 ULPs, 2**-53 ≈ 1.1e-16 each, per operation), far below one float32 ULP
(2**-24 ≈ 6e-8 relative): it serves as the exact answer for float32 maps. These functions
measure a float32 run against it, and say which side of a flip between two runs is right.
Pure numpy; the definitions hold in every front end:

- **|Δ|** is ``|run - exact|`` in float64 (the float32 value widened exactly).
- **ULPs from the exact value** are counted in float32 steps from the exact value rounded to
  the nearest float32 (ties to even), with :func:`~segdiff_gui.core.analysis.ulp_distance`:
  0 means the run's value *is* the exact value correctly rounded, 1 its float32 neighbour
  (still one of the two floats either side of the exact value, or the next one out). A pixel
  is **within 1 ULP** when every value of it is (a multi-class pixel's worst class counts).
- **Classes** are decided as everywhere in segdiff (core/analysis.py), the exact map's in
  float64 against the cutoff's float32 widened exactly: an exact value equal to that float32
  is foreground, one a hair below it is background, though it rounds to the cutoff. A run's
  class **is wrong** wherever the exact map decides the pixel and the run takes another
  class or none: a run whose two top classes are exactly equal there (a bfloat16 map can
  round three softmax classes to one value; argmax then takes the lowest) has made no
  decision, and a tie is no answer. A pixel tied in the exact map has no class to be right
  or wrong (``exact_ties``).
- **Float32 cannot decide** a binary pixel whose exact value lies within one float32 ULP of
  the cutoff (``|exact - cutoff| <= ulp(cutoff)``, the spacing of float32 at the cutoff: 2**-24
  ≈ 5.96e-8 at 0.55): a float32 result within 1 ULP of the exact value can then fall on
  either side. For a multi-class pixel: its two largest exact values are within one float32
  ULP of the largest (exactly tied included).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import (
    NAN_ULP,
    at_cutoff,
    class_map,
    flip_mask,
    is_multiclass,
    row_blocks,
    tie_mask,
    ulp_distance,
)
from segdiff_gui.core.findings import plural, verb

__all__ = [
    "ExactDecisions",
    "ExactError",
    "ExactSummary",
    "FlipSides",
    "cutoff_ulp",
    "exact_decisions",
    "exact_error",
    "flip_sides",
    "right_mask",
    "undecidable_mask",
    "undecidable_words",
    "wrong_mask",
]


def cutoff_ulp(cutoff: float) -> float:
    """One float32 ULP at the cutoff (its float32): how close an exact value must lie to the
    cutoff for float32 to be unable to decide its class (5.96e-8 at 0.55)."""
    return float(np.spacing(np.abs(np.float32(cutoff))))


def undecidable_mask(exact: np.ndarray, cutoff: float) -> np.ndarray:
    """H×W: the pixels float32 cannot decide (see the module's rules). NaN decides nothing
    and is never counted here."""
    values = np.asarray(exact, dtype=np.float64)
    if is_multiclass(values):
        top_two = np.sort(values, axis=-1)[..., -2:]
        gap = top_two[..., 1] - top_two[..., 0]
        ulp = np.spacing(np.abs(top_two[..., 1].astype(np.float32))).astype(np.float64)
        with np.errstate(invalid="ignore"):
            close: np.ndarray = gap <= ulp
        return close
    binary = values[..., 0] if values.ndim == 3 else values
    c32 = np.float64(np.float32(cutoff))
    with np.errstate(invalid="ignore"):
        near: np.ndarray = np.abs(binary - c32) <= cutoff_ulp(cutoff)
    return near


@dataclass(frozen=True)
class ExactDecisions:
    """What every run is measured against, decided once per exact map and cutoff: the exact
    map's class of every pixel, its tied pixels (multi-class), and the pixels float32 cannot
    decide (H×W each)."""

    classes: np.ndarray
    ties: np.ndarray
    undecidable: np.ndarray


def exact_decisions(exact: np.ndarray, cutoff: float) -> ExactDecisions:
    values = np.asarray(exact, dtype=np.float64)
    return ExactDecisions(
        class_map(values, cutoff), tie_mask(values), undecidable_mask(values, cutoff)
    )


def wrong_mask(
    decided: ExactDecisions, run: np.ndarray, cutoff: float, classes: np.ndarray | None = None
) -> np.ndarray:
    """H×W: where the exact map decides the pixel (it is not tied there) and ``run`` does not
    take its class: another class, or a tie of its own top classes (no decision).
    ``classes``: the run's class map at ``cutoff``, where it is made already."""
    return _wrong_and_tied(decided, run, cutoff, classes)[0]


def _wrong_and_tied(
    decided: ExactDecisions, run: np.ndarray, cutoff: float, classes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`wrong_mask`, and where among it the run's top classes are tied."""
    classes = class_map(run, cutoff) if classes is None else classes
    tied = tie_mask(run) & ~decided.ties
    wrong: np.ndarray = tied | ((classes != decided.classes) & ~decided.ties)
    return wrong, tied


def right_mask(
    decided: ExactDecisions, run: np.ndarray, cutoff: float, classes: np.ndarray | None = None
) -> np.ndarray:
    """H×W: where ``run`` takes the exact map's class, untied (as :func:`wrong_mask`); a
    pixel tied in the exact map is neither right nor wrong."""
    right: np.ndarray = ~decided.ties & ~wrong_mask(decided, run, cutoff, classes)
    return right


def undecidable_words(count: int, multiclass: bool, cutoff: float) -> str:
    """What "float32 cannot decide" means, with the number, after a count of ``count``
    pixels: ``lie within 1 float32 ULP (5.96e-08) of the cutoff``."""
    if multiclass:
        return (
            f"{verb(count, 'has its', 'have their')} two most likely exact classes within "
            "1 float32 ULP of each other"
        )
    ulp = cutoff_ulp(cutoff)
    return f"{verb(count, 'lies', 'lie')} within 1 float32 ULP ({ulp:.3g}) of the cutoff"


@dataclass(frozen=True)
class ExactError:
    """How far one float32 run is from the exact map, and where its classes are wrong.

    ``max_abs`` and ``mean_abs`` cover the values that are numbers in both maps; ``max_ulp``
    is the most float32 steps any of them lies from its exact value rounded to float32;
    ``rounded_pixels`` and ``within_one_ulp`` count the pixels whose every value is 0 and at
    most 1 such step away (a NaN on one side only is neither, and is counted in
    ``nan_mismatches``). ``wrong`` counts the pixels the exact map decides at ``cutoff`` where
    the run takes another class or ties its top classes (:func:`wrong_mask`); of them,
    ``undecidable`` those float32 cannot decide and ``wrong_tied`` those it can, where the run
    is tied (the two apart, so ``decided_wrong`` holds the ties);
    ``exact_ties`` the multi-class pixels tied in the exact map, neither right nor wrong."""

    label: str
    pixels: int
    max_abs: float
    mean_abs: float
    max_ulp: int
    rounded_pixels: int
    within_one_ulp: int
    wrong: int
    undecidable: int
    nan_mismatches: int
    cutoff: float
    wrong_tied: int = 0
    exact_ties: int = 0

    @property
    def within_one_ulp_share(self) -> float:
        return self.within_one_ulp / self.pixels if self.pixels else 1.0

    @property
    def decided_wrong(self) -> int:
        """Wrong classes float32 could have decided: the run's own error, not the cutoff's."""
        return self.wrong - self.undecidable

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "within_one_ulp_share": self.within_one_ulp_share,
            "decided_wrong": self.decided_wrong,
        }

    def summary(self) -> str:
        """``≤1 ULP 99.98%, max 3 ULP, 2 wrong (1 tied, 1 undecidable)``: a table cell."""
        parts = [
            *([f"{self.wrong_tied:,} tied"] if self.wrong_tied else []),
            *([f"{self.undecidable:,} undecidable"] if self.undecidable else []),
        ]
        wrong = f"{self.wrong:,} wrong" + (f" ({', '.join(parts)})" if parts else "")
        return f"≤1 ULP {_percent(self.within_one_ulp_share)}, max {self.max_ulp:,} ULP, {wrong}"

    def of_the_wrong(self) -> str:
        """`` (3 of them tied, no class decided; 1 of them undecidable in float32)``: what the
        wrong count holds, after it; empty when it is all plain wrong classes."""
        parts = [
            *([f"{self.wrong_tied:,} of them tied, no class decided"] if self.wrong_tied else []),
            *([f"{self.undecidable:,} of them undecidable in float32"] if self.undecidable else []),
        ]
        return f" ({'; '.join(parts)})" if parts else ""

    def sentence(self, multiclass: bool) -> str:
        """Against the exact map, in words (diagnosis, reports)."""
        nans = (
            f"; {plural(self.nan_mismatches, 'value')} NaN in one map only"
            if self.nan_mismatches
            else ""
        )
        return (
            f"{self.label} against the exact float64 map: max |Δ| {self.max_abs:.3g}, mean "
            f"|Δ| {self.mean_abs:.3g}, up to {self.max_ulp:,} ULP from the exact value; "
            f"{_percent(self.within_one_ulp_share)} of pixels within 1 ULP"
            f"{nans}; {self.wrong:,} wrong {verb(self.wrong, 'class', 'classes')} "
            f"{at_cutoff(self.cutoff, multiclass)}{self.of_the_wrong()}."
        )


def _percent(share: float) -> str:
    """A share that never rounds to 100% unless it is all (99.9996% is not every pixel)."""
    if share >= 1:
        return "100%"
    return f"{min(share * 100, 99.99):.2f}%"


@dataclass
class _ErrorTotals:
    max_abs: float = 0.0
    sum_abs: float = 0.0
    numbers: int = 0
    max_ulp: int = 0
    rounded: int = 0
    within: int = 0
    nan_mismatches: int = 0

    def add(self, exact: np.ndarray, run: np.ndarray, multiclass: bool) -> None:
        ulps = ulp_distance(run, exact.astype(np.float32))
        mismatch = ulps == NAN_ULP
        self.nan_mismatches += int(np.count_nonzero(mismatch))
        numbers = np.where(mismatch, 0, ulps)
        self.max_ulp = max(self.max_ulp, int(numbers.max(initial=0)))
        worst = np.where(mismatch, NAN_ULP, ulps)
        per_pixel = worst.max(axis=-1) if multiclass else worst
        self.rounded += int(np.count_nonzero(per_pixel == 0))
        self.within += int(np.count_nonzero(per_pixel <= 1))
        with np.errstate(invalid="ignore"):  # inf - inf is NaN: not a pair of numbers
            abs_diff = np.abs(run.astype(np.float64) - exact)
        abs_diff = abs_diff[~np.isnan(abs_diff)]
        self.numbers += abs_diff.size
        self.sum_abs += float(abs_diff.sum())
        self.max_abs = max(self.max_abs, float(abs_diff.max(initial=0.0)))


def exact_error(
    exact: np.ndarray,
    run: np.ndarray,
    cutoff: float,
    label: str = "",
    decided: ExactDecisions | None = None,
) -> ExactError:
    """``run`` (float32) against the ``exact`` float64 map of the same shape; ``decided``:
    the exact map's :func:`exact_decisions` at ``cutoff``, where a study made them once."""
    if exact.shape != run.shape:
        raise ValueError(f"maps differ in shape: {exact.shape} vs {run.shape}")
    exact = np.asarray(exact, dtype=np.float64)
    run = np.asarray(run, dtype=np.float32)
    decided = decided or exact_decisions(exact, cutoff)
    multiclass = is_multiclass(exact)
    totals = _ErrorTotals()
    for block in row_blocks(run):
        totals.add(exact[block], run[block], multiclass)
    wrong, tied = _wrong_and_tied(decided, run, cutoff)
    return ExactError(
        label=label,
        pixels=int(np.prod(exact.shape[:-1])) if multiclass else int(exact.size),
        max_abs=totals.max_abs,
        mean_abs=totals.sum_abs / totals.numbers if totals.numbers else 0.0,
        max_ulp=totals.max_ulp,
        rounded_pixels=totals.rounded,
        within_one_ulp=totals.within,
        wrong=int(np.count_nonzero(wrong)),
        undecidable=int(np.count_nonzero(wrong & decided.undecidable)),
        nan_mismatches=totals.nan_mismatches,
        cutoff=cutoff,
        wrong_tied=int(np.count_nonzero(tied & ~decided.undecidable)),
        exact_ties=int(np.count_nonzero(decided.ties)),
    )


@dataclass(frozen=True)
class FlipSides:
    """The pixels two float32 runs disagree on at the cutoff (their flips), and which side
    the exact map takes at each: ``first_right`` and ``second_right`` count where its class
    is that run's, ``neither_right`` where it is a third class or an exact tie (multi-class
    only); ``undecidable`` counts the flipped pixels float32 cannot decide."""

    first: str
    second: str
    cutoff: float
    multiclass: bool
    flips: int
    first_right: int
    second_right: int
    neither_right: int
    undecidable: int

    @property
    def ulp(self) -> float:
        """How close "cannot decide" is for a binary map: one float32 ULP at the cutoff."""
        return cutoff_ulp(self.cutoff)

    def closeness(self, count: int) -> str:
        """``2 lie within 1 float32 ULP (5.96e-08) of the cutoff``."""
        return f"{count:,} {undecidable_words(count, self.multiclass, self.cutoff)}"

    def sentence(self) -> str:
        """``At cutoff 0.55 the cpu and gpu runs disagree on 38 pixels; the exact class agrees
        with cpu at 31 and with gpu at 7; 2 lie within 1 float32 ULP (5.96e-08) of the
        cutoff, where float32 cannot decide them.``"""
        where = at_cutoff(self.cutoff, self.multiclass).capitalize()
        if not self.flips:
            return f"{where} {self.first} and {self.second} agree on every pixel's class."
        neither = f", and with neither at {self.neither_right:,}" if self.neither_right else ""
        return (
            f"{where} {self.first} and {self.second} disagree on "
            f"{plural(self.flips, 'pixel')}; the exact class agrees with {self.first} at "
            f"{self.first_right:,} and with {self.second} at {self.second_right:,}{neither}; "
            f"{self.closeness(self.undecidable)}"
            + (
                f", where float32 cannot decide {verb(self.undecidable, 'it', 'them')}."
                if self.undecidable
                else "."
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ulp": self.ulp, "sentence": self.sentence()}


def flip_sides(
    exact: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    cutoff: float,
    labels: tuple[str, str] = ("first", "second"),
    decided: ExactDecisions | None = None,
) -> FlipSides:
    """Which of two float32 runs is right where their classes differ at ``cutoff``
    (``decided``: as for :func:`exact_error`)."""
    decided = decided or exact_decisions(exact, cutoff)
    flipped = flip_mask(first, second, cutoff)
    truth = decided.classes[flipped]
    tied = decided.ties[flipped]
    first_right = (class_map(first, cutoff)[flipped] == truth) & ~tied
    second_right = (class_map(second, cutoff)[flipped] == truth) & ~tied
    undecidable = decided.undecidable[flipped]
    return FlipSides(
        first=labels[0],
        second=labels[1],
        cutoff=cutoff,
        multiclass=is_multiclass(exact),
        flips=int(flipped.sum()),
        first_right=int(first_right.sum()),
        second_right=int(second_right.sum()),
        neither_right=int((~(first_right | second_right)).sum()),
        undecidable=int(undecidable.sum()),
    )


@dataclass(frozen=True)
class ExactSummary:
    """A study against its exact run: every run's error (the reference's first) and, for
    every run against the reference, which side of their flips is right. What ``compare
    --json``, the API's ``exact`` and the report show; ``to_dict`` where JSON is written."""

    run: str  # the exact run's label
    cutoff: float
    multiclass: bool
    errors: tuple[ExactError, ...]
    flips: tuple[FlipSides, ...]

    @property
    def decided_wrong(self) -> int:
        """The most wrong classes float32 could have decided, over the runs."""
        return max((error.decided_wrong for error in self.errors), default=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "cutoff": self.cutoff,
            "ulp_at_cutoff": None if self.multiclass else cutoff_ulp(self.cutoff),
            "errors": [error.to_dict() for error in self.errors],
            "flips": [sides.to_dict() for sides in self.flips],
        }
