"""Float32 runs against the exact (float64) map: crafted maps with known answers."""

import numpy as np
import pytest

from segdiff_gui.core.analysis import class_map
from segdiff_gui.core.exact import (
    cutoff_ulp,
    exact_decisions,
    exact_error,
    flip_sides,
    right_mask,
    undecidable_mask,
    wrong_mask,
)

CUT = 0.55
C32 = float(np.float32(CUT))  # 0.550000011920929: the cutoff the classes are decided at
BELOW = float(np.nextafter(np.float32(CUT), np.float32(0)))


def _binary_case() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Five pixels: on the cutoff, a hair below it, far below, above, just below."""
    exact = np.array([[C32, C32 - 1e-12, 0.2, 0.6, 0.549]], dtype=np.float64)
    a = exact.astype(np.float32)  # every value the exact one correctly rounded
    b = np.array([[BELOW, BELOW, 0.2, 0.54, 0.5501]], dtype=np.float32)
    return exact, a, b


def test_one_ulp_at_the_cutoff_is_the_float32_spacing_there():
    assert cutoff_ulp(CUT) == 2.0**-24 == pytest.approx(5.96e-8, rel=1e-3)
    assert cutoff_ulp(0.5) == 2.0**-24 and cutoff_ulp(0.49) == 2.0**-25


def test_the_exact_class_is_decided_in_float64_against_the_float32_cutoff():
    # A hair below the cutoff's float32 rounds to it, yet is background: its exact value is
    # below. Exactly on it is foreground, as everywhere in segdiff.
    exact = np.array([C32 - 1e-12, C32, C32 + 1e-12], dtype=np.float64)
    assert class_map(exact, CUT).tolist() == [0, 1, 1]
    assert class_map(exact.astype(np.float32), CUT).tolist() == [1, 1, 1]


def test_float32_cannot_decide_exact_values_within_one_ulp_of_the_cutoff():
    ulp = cutoff_ulp(CUT)
    exact = np.array([C32, C32 - ulp, C32 + ulp, C32 - 1.01 * ulp, C32 + 1.01 * ulp, np.nan])
    assert undecidable_mask(exact, CUT).tolist() == [True, True, True, False, False, False]


def test_a_correctly_rounded_run_has_no_error_but_can_be_wrong_where_float32_cannot_decide():
    exact, a, _ = _binary_case()
    error = exact_error(exact, a, CUT, "a")
    assert (error.max_ulp, error.rounded_pixels, error.within_one_ulp) == (0, 5, 5)
    assert error.within_one_ulp_share == 1.0
    # The hair below the cutoff: a's correctly rounded value is the cutoff itself.
    assert (error.wrong, error.undecidable, error.decided_wrong) == (1, 1, 0)
    assert error.max_abs == np.abs(a.astype(np.float64) - exact).max() > 0
    assert error.nan_mismatches == 0


def test_a_run_off_by_many_ulps_is_wrong_where_it_could_have_been_right():
    exact, _, b = _binary_case()
    error = exact_error(exact, b, CUT, "b")
    steps = int(np.float32(0.6).view(np.int32) - np.float32(0.54).view(np.int32))
    assert error.max_ulp == steps
    # Correctly rounded: 0.2 only; within 1 ULP: also the two neighbours of the cutoff.
    assert (error.rounded_pixels, error.within_one_ulp) == (1, 3)
    assert error.within_one_ulp_share == pytest.approx(0.6)
    # Wrong: on the cutoff (undecidable), and the two decided far from it.
    assert (error.wrong, error.undecidable, error.decided_wrong) == (3, 1, 2)
    deltas = np.abs(b.astype(np.float64) - exact)
    assert error.max_abs == deltas.max() and error.mean_abs == pytest.approx(deltas.mean())
    assert error.summary() == f"≤1 ULP 60.00%, max {steps:,} ULP, 3 wrong (1 undecidable)"


def test_which_side_of_each_flip_is_right_and_how_many_float32_cannot_decide():
    exact, a, b = _binary_case()
    sides = flip_sides(exact, a, b, CUT, ("CPU", "GPU"))
    assert (sides.flips, sides.first_right, sides.second_right) == (4, 3, 1)
    assert (sides.neither_right, sides.undecidable) == (0, 2)
    assert sides.sentence() == (
        "At cutoff 0.55 CPU and GPU disagree on 4 pixels; the exact class agrees with CPU at 3 "
        "and with GPU at 1; 2 lie within 1 float32 ULP (5.96e-08) of the cutoff, where float32 "
        "cannot decide them."
    )


def test_runs_that_agree_say_so():
    exact, a, _ = _binary_case()
    sides = flip_sides(exact, a, a.copy(), CUT, ("cpu", "cpu b8"))
    assert sides.flips == 0
    assert sides.sentence() == "At cutoff 0.55 cpu and cpu b8 agree on every pixel's class."


def _softmax_case() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    near = 0.4 + 1e-9  # above 0.4 by far less than a float32 ULP there (2.98e-8)
    up = float(np.nextafter(np.float32(0.4), np.float32(1)))
    exact = np.array(
        [
            [
                [0.5, 0.3, 0.2],  # class 0
                [0.4, 0.4, 0.2],  # an exact tie: no class is right
                [0.2, 0.3, 0.5],  # class 2: neither run's
                [0.5, 0.3, 0.2],  # class 0; a is tied: no flip
                [near, 0.4, 0.6 - near],  # class 0 by less than a ULP
            ]
        ],
        dtype=np.float64,
    )
    a = np.array(
        [[[0.5, 0.3, 0.2], [0.41, 0.39, 0.2], [0.4, 0.3, 0.3], [0.45, 0.45, 0.1],
          [0.4, up, 0.2]]],
        dtype=np.float32,
    )  # fmt: skip
    b = np.array(
        [[[0.3, 0.5, 0.2], [0.39, 0.41, 0.2], [0.3, 0.4, 0.3], [0.3, 0.5, 0.2],
          [up, 0.4, 0.2]]],
        dtype=np.float32,
    )  # fmt: skip
    return exact, a, b


def test_softmax_flips_the_exact_class_settles_and_ties_it_does_not():
    exact, a, b = _softmax_case()
    assert undecidable_mask(exact, CUT).tolist() == [[False, True, False, False, True]]
    sides = flip_sides(exact, a, b, CUT, ("fp32", "bf16"))
    assert (sides.flips, sides.first_right, sides.second_right) == (4, 1, 1)
    assert (sides.neither_right, sides.undecidable) == (2, 2)
    assert sides.sentence() == (
        "At argmax fp32 and bf16 disagree on 4 pixels; the exact class agrees with fp32 at 1 "
        "and with bf16 at 1, and with neither at 2; 2 have their two most likely exact classes "
        "within 1 float32 ULP of each other, where float32 cannot decide them."
    )


def test_softmax_wrong_classes_count_a_runs_tie_and_leave_the_exact_maps_out():
    exact, a, b = _softmax_case()
    error_b = exact_error(exact, b, CUT, "bf16")
    # Wrong: pixels 0, 2 and 3; pixel 1 is tied in the exact map (neither), pixel 4 right.
    assert (error_b.wrong, error_b.undecidable, error_b.wrong_tied) == (3, 0, 0)
    assert error_b.exact_ties == 1
    error_a = exact_error(exact, a, CUT, "fp32")
    # Wrong: pixel 2, pixel 3 (a is tied there: no class decided, though argmax's lowest
    # class is the exact one) and pixel 4 (float32 cannot decide it); pixel 1 is neither.
    assert (error_a.wrong, error_a.undecidable, error_a.wrong_tied) == (3, 1, 1)
    assert error_a.decided_wrong == 2
    assert error_a.pixels == 5 and error_a.rounded_pixels == 1  # pixel 0 only
    assert error_a.sentence(multiclass=True).endswith(
        "3 wrong classes at argmax (1 of them tied, no class decided; 1 of them undecidable "
        "in float32)."
    )
    assert error_a.summary().endswith("3 wrong (1 tied, 1 undecidable)")


def test_right_and_wrong_split_the_pixels_the_exact_map_decides():
    exact, a, _ = _softmax_case()
    decided = exact_decisions(exact, CUT)
    right, wrong = right_mask(decided, a, CUT), wrong_mask(decided, a, CUT)
    assert right.tolist() == [[True, False, False, False, False]]
    assert wrong.tolist() == [[False, False, True, True, True]]
    assert not (right | wrong)[decided.ties].any()  # an exact tie is neither


def test_nan_against_a_number_is_a_mismatch_not_an_error_figure():
    exact = np.array([[0.25, np.nan, 0.75]])
    run = np.array([[np.nan, np.nan, 0.75]], dtype=np.float32)
    error = exact_error(exact, run, CUT)
    assert (error.nan_mismatches, error.max_ulp, error.max_abs) == (1, 0, 0.0)
    assert (error.rounded_pixels, error.within_one_ulp) == (2, 2)
    assert error.wrong == 0  # NaN is background, and so is 0.25


def test_maps_of_other_shapes_are_refused():
    with pytest.raises(ValueError, match="differ in shape"):
        exact_error(np.zeros((2, 2)), np.zeros((2, 3), dtype=np.float32), CUT)
