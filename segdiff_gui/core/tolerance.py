"""Tolerances as Polygraphy states them (its ``CompareFunc.simple``, and ``polygraphy run
--atol/--rtol/--check-error-stat``), for a run against its reference, per model output:

- **|Δ|** is ``|run - reference|`` in float64 (the float32 values widened exactly); a value
  equal in both maps (NaN in both, the same infinity) differs by 0, one NaN in one map only
  (or an infinity against another value) by +∞: it exceeds every tolerance.
- **The relative error** is ``|Δ| / |reference|``, a reference of 0 taken as 2⁻⁵² (float64's
  epsilon, as Polygraphy adds it: a run off a 0 by |Δ| has a relative error of |Δ|·2⁵²); an
  infinity against an infinity is NaN, which exceeds every tolerance.
- **A value exceeds** ``atol`` and ``rtol`` where ``|Δ| > atol`` and ``|Δ|/|reference| >
  rtol`` (Polygraphy's ``elemwise`` check): it passes within either, ``|Δ| ≤ max(atol,
  rtol·|reference|)``. (``numpy.isclose`` adds the two instead, ``atol + rtol·|reference|``;
  Polygraphy's rule is kept so that bounds carried over from it gate the same.) A tolerance
  not given is 0: ``atol`` alone bounds |Δ|, ``rtol`` alone the relative error.
- **With a quantile** Q (Polygraphy's ``--check-error-stat quantile --error-quantile Q``) the
  run fails where the Q-quantile of |Δ| exceeds ``atol`` and that of the relative error
  exceeds ``rtol``; without one, where any value exceeds them. Quantiles are numpy's
  default (linear between the two nearest values), over every value of the map (a softmax
  map's every class); one that lands on +∞ is +∞.
- **Per output**: each output a model's runs stored is a group of its own
  (``storage/studies.group_id`` keys the output chosen), so a group is checked with the
  tolerances given for its output's name, else with those given without a name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import row_blocks
from segdiff_gui.core.study import GroupAnalysis

__all__ = [
    "OutputTolerances",
    "Tolerance",
    "ToleranceCheck",
    "check_tolerance",
    "parse_output_value",
    "tolerance_checks",
]


@dataclass(frozen=True)
class Tolerance:
    """``atol`` and ``rtol`` (each ≥ 0; 0 allows nothing) and, where given, the quantile of
    the errors they bound instead of every value."""

    atol: float = 0.0
    rtol: float = 0.0
    quantile: float | None = None

    def __post_init__(self) -> None:
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} is {value!r}: give a finite number ≥ 0")
        if self.quantile is not None and not 0 <= self.quantile <= 1:
            raise ValueError(f"quantile is {self.quantile!r}: give a number from 0 to 1")

    def text(self) -> str:
        """``atol 1e-05 and rtol 0.001`` (``… at quantile 0.99``)."""
        at = "" if self.quantile is None else f" at quantile {self.quantile!r}"
        return f"atol {self.atol!r} and rtol {self.rtol!r}{at}"


@dataclass(frozen=True)
class ToleranceCheck:
    """One run against its reference under a :class:`Tolerance`: how many of its ``values``
    exceed it (``exceeding``: both tolerances, value by value), the largest |Δ| and relative
    error (the tolerances that alone would pass every value), and with a quantile the
    quantiles of both; ``passed`` as the module says."""

    label: str
    reference: str
    tolerance: Tolerance
    values: int
    exceeding: int
    max_abs: float
    max_rel: float
    quantile_abs: float | None = None
    quantile_rel: float | None = None
    output: str = ""  # the output's name the tolerance was chosen by ("": the default)

    @property
    def passed(self) -> bool:
        tolerance = self.tolerance
        if tolerance.quantile is None:
            return self.exceeding == 0
        assert self.quantile_abs is not None and self.quantile_rel is not None
        over_abs = _beyond(self.quantile_abs, tolerance.atol)
        return not (over_abs and _beyond(self.quantile_rel, tolerance.rtol))

    def failure(self, title: str) -> str:
        """The ``check`` line of a run that did not pass, in its other lines' words. A bound
        of 0 is implied by the other (a relative error over it is an |Δ| over 0, and so on)
        and is left unsaid."""
        tolerance = self.tolerance
        counted = f"{self.exceeding:,} of {self.values:,} values"
        if tolerance.quantile is None:
            over = _over(("|Δ|", "atol", tolerance.atol), ("|Δ|/|ref|", "rtol", tolerance.rtol))
            what = f"{over} at {counted} (max |Δ| {self.max_abs!r}, max |Δ|/|ref| {self.max_rel!r})"
        else:
            at = f"at quantile {tolerance.quantile!r}"
            over = _over(
                (f"|Δ| {at} {self.quantile_abs!r}", "atol", tolerance.atol),
                (f"|Δ|/|ref| {at} {self.quantile_rel!r}", "rtol", tolerance.rtol),
            )
            what = f"{over} ({counted} beyond the tolerance)"
        return f"FAIL {self.label} ({title}): {what} against {self.reference}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(data.pop("tolerance"))
        return {**data, "passed": self.passed}


def _over(*clauses: tuple[str, str, float]) -> str:
    """``|Δ| > atol 1e-05 and |Δ|/|ref| > rtol 0.001``, the clauses of a bound of 0 left out
    where another is said (both 0: ``|Δ| > atol 0.0``)."""
    said = [clause for clause in clauses if clause[2]] or [clauses[0]]
    return " and ".join(f"{figure} > {name} {bound!r}" for figure, name, bound in said)


def _beyond(figure: float, bound: float) -> bool:
    """Polygraphy's test of a statistic: over the bound, or NaN."""
    return math.isnan(figure) or figure > bound


_EPSILON = float(np.finfo(np.float64).eps)  # what a reference of 0 is taken as (Polygraphy's)


def _errors(reference: np.ndarray, run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|Δ| and the relative error of ``run`` (float64, as the module says)."""
    ref = np.asarray(reference, dtype=np.float64)
    other = np.asarray(run, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        absolute = np.abs(other - ref)
        same = (ref == other) | (np.isnan(ref) & np.isnan(other))
        absolute[same] = 0.0
        absolute[np.isnan(absolute)] = np.inf  # NaN in one map only, or ∞ against ∞
        relative = absolute / np.where(ref == 0, _EPSILON, np.abs(ref))
    return absolute, relative


def _quantile(values: np.ndarray, q: float) -> float:
    """numpy's (linear) quantile, NaN taken as +∞ (so that it sorts last), +∞ where it lands
    between two infinities."""
    with np.errstate(invalid="ignore"):  # ∞ - ∞ between two infinities
        found = float(np.quantile(np.where(np.isnan(values), np.inf, values), q))
    return math.inf if math.isnan(found) else found


def check_tolerance(
    reference: np.ndarray,
    run: np.ndarray,
    tolerance: Tolerance,
    labels: tuple[str, str] = ("reference", "run"),
    output: str = "",
) -> ToleranceCheck:
    """``run`` against ``reference`` (maps of one shape) under ``tolerance``, row block by
    row block; every error is kept only where a quantile needs them all."""
    if reference.shape != run.shape:
        raise ValueError(f"maps differ in shape: {reference.shape} vs {run.shape}")
    keep = tolerance.quantile is not None
    absolute_all = np.empty(reference.shape) if keep else None
    relative_all = np.empty(reference.shape) if keep else None
    exceeding, max_abs, max_rel = 0, 0.0, 0.0
    for block in row_blocks(reference):
        absolute, relative = _errors(reference[block], run[block])
        with np.errstate(invalid="ignore"):
            over = (absolute > tolerance.atol) & ~(relative <= tolerance.rtol)  # NaN: over
        exceeding += int(np.count_nonzero(over))
        max_abs = max(max_abs, float(absolute.max(initial=0.0)))
        relative_numbers = np.where(np.isnan(relative), np.inf, relative)
        max_rel = max(max_rel, float(relative_numbers.max(initial=0.0)))
        if absolute_all is not None and relative_all is not None:
            absolute_all[block], relative_all[block] = absolute, relative
    quantiles: tuple[float | None, float | None] = (None, None)
    if tolerance.quantile is not None and absolute_all is not None and relative_all is not None:
        quantiles = (
            _quantile(absolute_all, tolerance.quantile),
            _quantile(relative_all, tolerance.quantile),
        )
    return ToleranceCheck(
        label=labels[1],
        reference=labels[0],
        tolerance=tolerance,
        values=int(reference.size),
        exceeding=exceeding,
        max_abs=max_abs,
        max_rel=max_rel,
        quantile_abs=quantiles[0],
        quantile_rel=quantiles[1],
        output=output,
    )


def tolerance_checks(
    study: GroupAnalysis, tolerance: Tolerance, output: str = ""
) -> list[ToleranceCheck]:
    """Every run of ``study`` but its reference against the reference, in the study's order."""
    reference = study.reference
    return [
        check_tolerance(
            reference.probabilities,
            run.probabilities,
            tolerance,
            (reference.label, run.label),
            output,
        )  # fmt: skip
        for run in study.others
    ]


def parse_output_value(text: str, wanted: str, valid: Any) -> tuple[str, float]:
    """``[OUTPUT:]X`` as Polygraphy takes a per-output value (``probs:1e-4``, or ``1e-5`` for
    every output not named): the output's name (``""``: not named) and the number, which
    ``valid`` must accept; ValueError naming ``wanted`` otherwise. The name is all before the
    last colon (a name may hold colons)."""
    name, _, number = text.rpartition(":")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not [OUTPUT:]{wanted}") from None
    if not valid(value):
        raise ValueError(f"{text!r}: {number} is not {wanted}")
    return name, value


@dataclass(frozen=True)
class OutputTolerances:
    """The tolerances a gate was given, each per output's name (``""``: every output not
    named), as Polygraphy takes ``--atol 1e-5 probs:1e-4``."""

    atol: Mapping[str, float] = field(default_factory=dict)
    rtol: Mapping[str, float] = field(default_factory=dict)
    quantile: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        atol: Iterable[tuple[str, float]] = (),
        rtol: Iterable[tuple[str, float]] = (),
        quantile: Iterable[tuple[str, float]] = (),
    ) -> OutputTolerances:
        """From ``(output, value)`` pairs as given, a later one for an output replacing an
        earlier."""
        return cls(dict(atol), dict(rtol), dict(quantile))

    @property
    def given(self) -> bool:
        return bool(self.atol or self.rtol or self.quantile)

    @property
    def named(self) -> set[str]:
        """The outputs named (not the default)."""
        return {name for values in (self.atol, self.rtol, self.quantile) for name in values} - {""}

    def output_of(self, names: Sequence[str]) -> str:
        """Which of an output's ``names`` (its name, the selection given for it) a tolerance
        was given for; ``""`` where none was."""
        return next((name for name in names if name in self.named), "")

    def for_output(self, names: Sequence[str]) -> Tolerance | None:
        """The tolerance of the output known by ``names``: what was given for it by name,
        else without a name; None where nothing applies to it."""
        output = self.output_of(names)

        def pick(values: Mapping[str, float]) -> float | None:
            return values.get(output, values.get("")) if output else values.get("")

        atol, rtol, quantile = pick(self.atol), pick(self.rtol), pick(self.quantile)
        if atol is None and rtol is None and quantile is None:
            return None
        return Tolerance(atol or 0.0, rtol or 0.0, quantile)

    def text(self) -> str:
        """``atol 1e-05 (probs: 0.0001), rtol 0.001``: the bounds, as a verdict names them."""
        parts = []
        for name, values in (("atol", self.atol), ("rtol", self.rtol), ("quantile", self.quantile)):
            if not values:
                continue
            default = f" {values['']!r}" if "" in values else ""
            named = ", ".join(f"{k}: {v!r}" for k, v in values.items() if k)
            parts.append(f"{name}{default}" + (f" ({named})" if named else ""))
        return ", ".join(parts)

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {"atol": dict(self.atol), "rtol": dict(self.rtol), "quantile": dict(self.quantile)}
