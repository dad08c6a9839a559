"""TF32 rounding (core/tf32.py) bit for bit against the definition: round to nearest, ties
away from zero, at 10 explicit mantissa bits, the result a float32 whose 13 low bits are zero.
Every expected pattern is written out here, not computed by the code under test."""

from __future__ import annotations

import numpy as np
import pytest

from segdiff_gui.core.tf32 import to_tf32

# (float32 bits in, TF32 bits out as float32, what the case is)
CASES = [
    (0x3F800000, 0x3F800000, "1.0 is a TF32 value"),
    (0x3F800FFF, 0x3F800000, "just under half a TF32 ULP rounds down"),
    (0x3F801000, 0x3F802000, "a tie (even kept bit) rounds away from zero, not to even"),
    (0x3F803000, 0x3F804000, "a tie (odd kept bit) rounds away from zero"),
    (0x3F801001, 0x3F802000, "just over half a ULP rounds up"),
    (0x3F801FFF, 0x3F802000, "the largest dropped part rounds up"),
    (0xBF801000, 0xBF802000, "a negative tie rounds away from zero (more negative)"),
    (0xBF800FFF, 0xBF800000, "a negative value under the tie rounds toward zero"),
    (0x3FFFF000, 0x40000000, "a tie with every kept mantissa bit set carries into the exponent"),
    (0x3EAAAAAB, 0x3EAAA000, "1/3 rounds down (dropped part 0x0AAB)"),
    (0x3DCCCCCD, 0x3DCCC000, "0.1 rounds down (dropped part 0x0CCD)"),
    (0x3F333333, 0x3F334000, "0.7 rounds up (dropped part 0x1333)"),
    (0x00000000, 0x00000000, "+0 stays"),
    (0x80000000, 0x80000000, "-0 keeps its sign"),
    (0x00000FFF, 0x00000000, "a tiny subnormal rounds to +0"),
    (0x80000FFF, 0x80000000, "a tiny negative subnormal rounds to -0"),
    (0x00001000, 0x00002000, "a subnormal tie rounds away to the smallest TF32 subnormal"),
    (0x00003000, 0x00004000, "a subnormal tie with an odd kept bit rounds away"),
    (0x00402001, 0x00402000, "a subnormal rounds down"),
    (0x007FF000, 0x00800000, "the largest subnormals round up to the smallest normal"),
    (0x807FF000, 0x80800000, "and so do negative ones"),
    (0x7F7FE000, 0x7F7FE000, "the largest TF32 value stays"),
    (0x7F7FEFFF, 0x7F7FE000, "under half a ULP above it rounds down to it"),
    (0x7F7FF000, 0x7F800000, "a tie above the largest TF32 value rounds up to +inf"),
    (0x7F7FFFFF, 0x7F800000, "float32's largest value rounds up to +inf"),
    (0xFF7FFFFF, 0xFF800000, "and its negative to -inf"),
    (0x7F800000, 0x7F800000, "+inf stays"),
    (0xFF800000, 0xFF800000, "-inf stays"),
    (0x7FC00000, 0x7FC00000, "a quiet NaN stays"),
    (0xFFC00000, 0xFFC00000, "a negative quiet NaN stays"),
    (0x7F800001, 0x7FC00000, "a NaN whose payload is in the dropped bits stays a NaN"),
    (0x7FA02000, 0x7FE02000, "a signalling NaN becomes quiet, its kept payload kept"),
    (0xFFC01234, 0xFFC00000, "a NaN's dropped payload goes, its sign stays"),
]


@pytest.mark.parametrize(("given", "expected", "case"), CASES, ids=[c[2] for c in CASES])
def test_rounding_matches_the_definition_bit_for_bit(given: int, expected: int, case: str) -> None:
    value = np.array([given], dtype=np.uint32).view(np.float32)
    rounded = to_tf32(value)
    assert rounded.dtype == np.float32
    got = int(rounded.view(np.uint32)[0])
    assert got == expected, f"{case}: {given:#010x} → {got:#010x}, not {expected:#010x}"


def test_every_result_is_the_nearest_tf32_value_ties_away() -> None:
    """On a million random float32 patterns, each result is the nearer of the two TF32
    neighbours (measured in float64, exactly), a tie going to the larger magnitude."""
    rng = np.random.default_rng(36)
    bits = rng.integers(0, 0xFF800000, 1_000_000, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]  # finite values
    values = bits.view(np.float32)
    below = (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    magnitude = np.abs(below) + np.ldexp(1.0, _tf32_ulp_exponent(bits))
    above = np.copysign(magnitude, values.astype(np.float64))
    exact = values.astype(np.float64)
    nearer_above = np.abs(above - exact) <= np.abs(exact - below)  # ties: away from zero
    expected = np.where(nearer_above, above, below)
    expected = np.where(np.abs(expected) >= 2.0**128, np.copysign(np.inf, exact), expected)
    got = to_tf32(values).astype(np.float64)
    assert np.array_equal(got, expected)
    assert not np.any(to_tf32(values).view(np.uint32) & 0x1FFF)


def _tf32_ulp_exponent(bits: np.ndarray) -> np.ndarray:
    """log2 of TF32's last place at each value: 2^(e - 127 - 10), subnormals as e = 1."""
    exponent = ((bits >> 23) & 0xFF).astype(np.int64)
    return np.maximum(exponent, 1) - 127 - 10


def test_only_float32_is_rounded() -> None:
    with pytest.raises(TypeError, match="float32"):
        to_tf32(np.zeros(3, dtype=np.float64))


def test_the_input_is_left_as_it_was() -> None:
    values = np.array([1.0001, -3.3], dtype=np.float32)
    before = values.copy()
    to_tf32(values)
    assert np.array_equal(values, before)
