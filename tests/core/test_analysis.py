import numpy as np
import pytest

from segdiff_gui.core.analysis import class_map, compare_maps, ulp_distance
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


def test_argmax_ties_go_to_the_lowest_class():
    tied = np.array([[[0.4, 0.4, 0.2]]], dtype=np.float32)
    assert class_map(tied, 0.5).tolist() == [[0]]
    nudged = tied.copy()
    nudged[0, 0, 1] = np.nextafter(np.float32(0.4), np.float32(1))
    assert compare_maps(tied, nudged).flips == 1


def test_max_location_and_fraction():
    reference = np.zeros((3, 4), dtype=np.float32)
    other = reference.copy()
    other[2, 1] = 0.25
    other[0, 0] = 1e-45
    result = compare_maps(reference, other)
    assert result.max_location == (2, 1) and result.differing_fraction == 2 / 12
