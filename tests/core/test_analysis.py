import numpy as np
import pytest

from segdiff_gui.core import analysis
from segdiff_gui.core.analysis import (
    NAN_ULP,
    MapComparison,
    class_map,
    compare_maps,
    flip_mask,
    signed_difference,
    tie_mask,
    ulp_distance,
)
from segdiff_gui.core.floatfmt import float32_bits, format_float32


def test_ulp_distance_handles_zero_signs_subnormals_and_neighbours():
    half = np.float32(0.5)
    a = np.array([0.0, -0.0, 1e-45, -1e-45, half, 1.0], dtype=np.float32)
    b = np.array(
        [-0.0, 1e-45, -1e-45, 0.0, np.nextafter(half, np.float32(1)), 0.5], dtype=np.float32
    )
    assert ulp_distance(a, b).tolist() == [0, 1, 2, 1, 1, 2**23]


def test_seed_case_is_one_flip_in_the_right_direction():
    reference = np.array([[0.549857, 0.2]], dtype=np.float32)
    other = np.array([[0.550076, 0.2]], dtype=np.float32)
    result = compare_maps(reference, other, cutoff=0.55)
    assert result.flips == 1 and result.differing_pixels == 1
    assert class_map(reference, 0.55)[0, 0] == 0 and class_map(other, 0.55)[0, 0] == 1
    assert result.max_abs == pytest.approx(0.000219, abs=1e-6)


def test_cutoff_equal_to_value_is_foreground():
    assert class_map(np.float32([0.55]), 0.55).tolist() == [1]


def test_multiclass_flips_are_argmax_changes_and_pixels_count_once():
    reference = np.zeros((1, 2, 3), dtype=np.float32)
    reference[0, 0] = [0.5, 0.3, 0.2]
    reference[0, 1] = [0.2, 0.3, 0.5]
    other = reference.copy()
    other[0, 0] = [0.3, 0.5, 0.2]  # argmax changes
    other[0, 1, 2] = np.nextafter(np.float32(0.5), np.float32(1))  # one ULP, no flip
    result = compare_maps(reference, other)
    assert (result.flips, result.differing_pixels, result.pixels) == (1, 2, 2)


def test_identical_maps_are_bitwise_equal():
    data = np.random.default_rng(0).random((8, 8), dtype=np.float32)
    assert compare_maps(data, data.copy()).bitwise_equal


def test_exact_formatting_shows_one_ulp():
    value = np.float32(0.549857)
    neighbour = np.nextafter(value, np.float32(1))
    assert format_float32(value) == "0.549857"
    assert format_float32(neighbour) != format_float32(value)
    assert np.float32(format_float32(neighbour)) == neighbour
    assert float32_bits(1.0) == "0x3f800000"


def test_nan_rules_are_documented_and_consistent():
    from segdiff_gui.core.analysis import NAN_ULP

    reference = np.array([[np.nan, np.nan, 0.7, 0.2]], dtype=np.float32)
    other = np.array([[np.nan, 0.7, np.nan, 0.2]], dtype=np.float32)
    assert ulp_distance(reference, other).tolist() == [[0, NAN_ULP, NAN_ULP, 0]]
    result = compare_maps(reference, other, cutoff=0.5)
    assert result.nan_mismatches == 2 and result.differing_pixels == 2
    assert result.flips == 2  # NaN is never >= cutoff: background against 0.7's foreground
    assert result.max_abs == 0.0  # NaN differences are counted apart, not as magnitudes


def test_plus_and_minus_zero_are_equal_in_ulps_but_not_bitwise():
    result = compare_maps(np.float32([[0.0]]), np.float32([[-0.0]]))
    assert result.differing_pixels == 0 and result.max_ulp == 0 and not result.bitwise_equal


def test_argmax_ties_go_to_the_lowest_class_and_are_ties_not_flips():
    tied = np.array([[[0.4, 0.4, 0.2]]], dtype=np.float32)
    assert class_map(tied, 0.5).tolist() == [[0]]
    nudged = tied.copy()
    nudged[0, 0, 1] = np.nextafter(np.float32(0.4), np.float32(1))
    # Class 0 was no decision: the tie broke to the lowest class. A tie, not a flip.
    result = compare_maps(tied, nudged)
    assert (result.flips, result.ties) == (0, 1)
    assert not flip_mask(tied, nudged, 0.5).any()
    clear = np.array([[[0.5, 0.3, 0.2]]], dtype=np.float32)
    assert (compare_maps(clear, nudged).flips, compare_maps(clear, nudged).ties) == (1, 0)


def test_a_low_precision_map_with_every_class_equal_is_all_ties_and_no_flips():
    """A bf16 map rounded all three classes to 0.33398438, and every pixel was
    counted as a flip."""
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(16, 16, 3))
    float32 = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    bf16 = np.full((16, 16, 3), 0.33398438, dtype=np.float32)
    result = compare_maps(float32, bf16)
    assert result.ties == 256 and result.flips == 0
    assert tie_mask(bf16).all() and not tie_mask(float32).any()
    assert not tie_mask(float32[..., 0]).any()  # a sigmoid map has no argmax to tie


def test_max_location_and_fraction():
    reference = np.zeros((3, 4), dtype=np.float32)
    other = reference.copy()
    other[2, 1] = 0.25
    other[0, 0] = 1e-45
    result = compare_maps(reference, other)
    assert result.max_location == (2, 1) and result.differing_fraction == 2 / 12


def _obvious_comparison(ref: np.ndarray, oth: np.ndarray, cutoff: float) -> MapComparison:
    """compare_maps written the slow, whole-array way, as the blockwise kernel must agree."""
    ulps = ulp_distance(ref, oth)
    nan_mismatch = ulps == NAN_ULP
    with np.errstate(invalid="ignore"):
        abs_diff = np.abs(oth.astype(np.float64) - ref.astype(np.float64))
    finite = np.where(np.isnan(abs_diff), -1.0, abs_diff)
    per_pixel = (ulps > 0).any(axis=-1) if ref.ndim == 3 else ulps > 0
    largest = int(np.argmax(finite))
    valid = abs_diff[~np.isnan(abs_diff)]
    return MapComparison(
        pixels=int(per_pixel.size),
        differing_pixels=int(np.count_nonzero(per_pixel)),
        bitwise_equal=ref.tobytes() == oth.tobytes(),
        max_ulp=int(np.where(nan_mismatch, 0, ulps).max()),
        max_abs=float(valid.max(initial=0.0)),
        mean_abs=float(valid.mean()),
        max_location=tuple(int(i) for i in np.unravel_index(largest, ref.shape))
        if finite.flat[largest] > 0
        else None,
        nan_mismatches=int(np.count_nonzero(nan_mismatch)),
        flips=int(np.count_nonzero(flip_mask(ref, oth, cutoff))),
        cutoff=cutoff,
        ties=int(np.count_nonzero(tie_mask(ref) | tie_mask(oth))) if ref.ndim == 3 else 0,
    )


@pytest.mark.parametrize("channels", [None, 3])
def test_blockwise_comparison_agrees_with_the_whole_array_one(monkeypatch, channels):
    # Small blocks so that the 301 rows span many, some taking the fast path (finite, sign bit
    # clear) and some the general one (NaN, infinity, negative, -0), and ties across blocks.
    monkeypatch.setattr(analysis, "_BLOCK_BYTES", 4096)
    rng = np.random.default_rng(7)
    shape = (301, 67) if channels is None else (301, 67, channels)
    ref = rng.random(shape, dtype=np.float32)
    oth = ref + rng.normal(0, 1e-6, shape).astype(np.float32)
    oth[250:] = ref[250:]  # the last blocks are equal
    for row, value in [(40, np.nan), (120, -0.25), (160, -0.0)]:
        oth[row, 5] = value
    ref[41, 6] = oth[41, 6] = np.nan  # NaN on both sides: equal
    ref[90, 6] = oth[90, 6] = np.inf  # inf - inf is NaN, not a number pair
    # The same largest |difference| in two blocks: the first is reported.
    ref[10, 3] = ref[200, 3] = np.float32(-1.0)
    oth[10, 3] = oth[200, 3] = np.float32(1.0)
    for cutoff in (0.3, 0.5):
        assert compare_maps(ref, oth, cutoff) == _obvious_comparison(ref, oth, cutoff)
    assert compare_maps(ref, ref.copy()).bitwise_equal


def test_difference_map_is_the_exact_difference_rounded_once_to_float32():
    rng = np.random.default_rng(11)
    ref = rng.random(10_000, dtype=np.float32)
    other = np.concatenate(
        [
            np.nextafter(ref[:5000], np.float32(1)),  # one ULP: exact (Sterbenz)
            rng.random(5000, dtype=np.float32),  # far apart: rounded once
        ]
    )
    exact = signed_difference(ref, other)
    shown = analysis.difference_map(ref, other)
    assert shown.dtype == np.float32
    assert np.array_equal(shown, exact.astype(np.float32))
    assert np.array_equal(shown[:5000].astype(np.float64), exact[:5000])
    assert np.all((shown != 0) == (ref != other))
