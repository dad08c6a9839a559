"""Polygraphy's tolerances: a value exceeds where |Δ| > atol and |Δ|/|reference| >
rtol; with a quantile, the quantiles of both are checked instead. Each figure is recomputed
here as Polygraphy's ``CompareFunc.simple`` computes it (its ``elemwise`` mismatches, its
``quantile`` statistic), never pinned."""

from __future__ import annotations

import math

import numpy as np
import pytest

from segdiff_gui.core.tolerance import (
    OutputTolerances,
    Tolerance,
    check_tolerance,
    parse_output_value,
)

EPSILON = 2.220446049250313e-16  # what Polygraphy adds to a reference of 0 before dividing


def polygraphy_errors(reference: np.ndarray, run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|Δ| and the relative error as Polygraphy's ``check_outputs_match`` makes them (out0:
    the run, out1: the reference), for finite maps."""
    absdiff = np.abs(run.astype(np.float64) - reference.astype(np.float64))
    out1 = reference.astype(np.float64).copy()
    out1[out1 == 0] += EPSILON
    return absdiff, absdiff / np.abs(out1)


def maps(seed: int, shape: tuple[int, ...] = (40, 30)) -> tuple[np.ndarray, np.ndarray]:
    """A reference (some values 0) and a run off it by errors of many sizes."""
    rng = np.random.default_rng(seed)
    reference = rng.random(shape, dtype=np.float32)
    reference.flat[::17] = 0.0
    scale = 10.0 ** rng.uniform(-9, -1, shape)
    run = (reference + rng.standard_normal(shape) * scale).astype(np.float32)
    run.flat[::23] = reference.flat[::23]  # some values equal
    return reference, run


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    ("atol", "rtol"), [(1e-5, 0.0), (0.0, 1e-3), (1e-5, 1e-3), (1e-3, 1e-5), (0.0, 0.0)]
)
def test_values_exceed_as_polygraphy_s_elemwise_check_counts_them(seed, atol, rtol):
    reference, run = maps(seed)
    found = check_tolerance(reference, run, Tolerance(atol, rtol))
    absdiff, reldiff = polygraphy_errors(reference, run)
    mismatches = ((absdiff > atol) | np.isnan(absdiff)) & ((reldiff > rtol) | np.isnan(reldiff))
    assert found.exceeding == int(mismatches.sum())
    assert found.passed == (not mismatches.any())
    assert found.values == reference.size and found.max_abs == absdiff.max()


@pytest.mark.parametrize("quantile", [0.0, 0.5, 0.9, 0.99, 1.0])
@pytest.mark.parametrize(("atol", "rtol"), [(1e-4, 0.0), (0.0, 1e-2), (1e-6, 1e-4)])
def test_a_quantile_checks_the_quantiles_of_both_errors(quantile, atol, rtol):
    reference, run = maps(5, (3, 50, 4))  # a softmax-shaped map: every class is a value
    found = check_tolerance(reference, run, Tolerance(atol, rtol, quantile))
    absdiff, reldiff = polygraphy_errors(reference, run)
    q_abs, q_rel = np.quantile(absdiff, quantile), np.quantile(reldiff, quantile)
    assert (found.quantile_abs, found.quantile_rel) == (q_abs, q_rel)
    assert found.passed == (not (q_abs > atol and q_rel > rtol))


def test_polygraphy_s_rule_is_kept_not_numpy_isclose_s():
    """A value within atol + rtol·|ref| but beyond both alone exceeds (numpy.isclose would
    pass it): bounds carried over from Polygraphy gate the same here."""
    reference = np.array([1.0], dtype=np.float32)
    run = np.array([1.0 + 1.5e-3], dtype=np.float32)  # |Δ| ≈ 1.5e-3
    assert np.isclose(run, reference, rtol=1e-3, atol=1e-3)  # 1.5e-3 <= 1e-3 + 1e-3
    assert not check_tolerance(reference, run, Tolerance(1e-3, 1e-3)).passed
    assert check_tolerance(reference, run, Tolerance(2e-3, 1e-3)).passed


def test_nan_and_infinities():
    """Equal values (NaN in both, one infinity in both) differ by 0; a NaN in one map only,
    or an infinity against a number, exceeds every tolerance."""
    reference = np.array([np.nan, np.inf, np.nan, 0.5, np.inf, 0, 0.25, 1], dtype=np.float32)
    run = np.array([np.nan, np.inf, 0.5, np.nan, 1.0, 0, 0.25, 1], dtype=np.float32)
    found = check_tolerance(reference, run, Tolerance(1e9, 1e9))
    assert found.exceeding == 3 and math.isinf(found.max_abs)
    assert not check_tolerance(reference, run, Tolerance(1e9, 1e9, quantile=0.99)).passed
    # Five of eight values are 0 off: the median passes any tolerance, 0.9 none.
    assert check_tolerance(reference, run, Tolerance(0.0, 0.0, quantile=0.5)).passed
    assert math.isinf(check_tolerance(reference, run, Tolerance(quantile=0.9)).quantile_abs)


def test_a_failure_says_the_run_the_figure_the_bound_and_how_many_exceed():
    reference, run = maps(3)
    found = check_tolerance(reference, run, Tolerance(1e-5), ("cpu b1 r0", "gpu b1 r0"))
    line = found.failure("m.keras on a.png")
    assert line.startswith("FAIL gpu b1 r0 (m.keras on a.png): |Δ| > atol 1e-05 at ")
    assert f"at {found.exceeding:,} of {reference.size:,} values" in line
    assert line.endswith("against cpu b1 r0") and "rtol" not in line  # a bound of 0: unsaid
    quantile = check_tolerance(reference, run, Tolerance(1e-6, 1e-6, 0.9), ("a", "b"))
    text = quantile.failure("t")
    assert f"|Δ| at quantile 0.9 {quantile.quantile_abs!r} > atol 1e-06 and" in text


def test_per_output_values_as_polygraphy_takes_them():
    assert parse_output_value("1e-5", "x", lambda v: v >= 0) == ("", 1e-5)
    assert parse_output_value("probs:1e-4", "x", lambda v: v >= 0) == ("probs", 1e-4)
    assert parse_output_value("head:0:2", "x", lambda v: v >= 0) == ("head:0", 2.0)
    with pytest.raises(ValueError, match="is not"):
        parse_output_value("probs:-1", "x", lambda v: v >= 0)
    with pytest.raises(ValueError, match=r"is not \[OUTPUT:\]x"):
        parse_output_value("probs:", "x", lambda v: v >= 0)
    given = OutputTolerances.of(atol=[("", 1e-5), ("probs", 1e-3)], rtol=[("", 1e-2)])
    assert given.for_output(("1", "probs")) == Tolerance(1e-3, 1e-2)
    assert given.for_output(("0", "edges")) == Tolerance(1e-5, 1e-2)
    assert given.named == {"probs"} and given.output_of(("1", "probs")) == "probs"
    assert OutputTolerances.of(atol=[("probs", 1e-3)]).for_output(("edges",)) is None
    assert given.text() == "atol 1e-05 (probs: 0.001), rtol 0.01"


def test_a_reference_of_0_is_taken_as_float64_s_epsilon_as_polygraphy_takes_it():
    """A background value that underflows to 0 in the reference and to 1e-30 in the run is
    within any rtol above 1e-30·2⁵² ≈ 4.5e-15, as in Polygraphy; 1e-3 off a 0 is not."""
    reference = np.zeros(2, dtype=np.float32)
    run = np.array([1e-30, 1e-3], dtype=np.float32)
    found = check_tolerance(reference, run, Tolerance(rtol=1e-5))
    assert found.exceeding == 1 and found.max_rel == np.float64(np.float32(1e-3)) / EPSILON
