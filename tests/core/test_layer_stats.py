"""Per-layer figures of the layer probe, on arrays whose answers are known."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from segdiff_gui.core.layer_stats import compare_layer, compare_layers


def test_one_ulp_and_a_known_error_give_exact_figures() -> None:
    reference = np.full((2, 4, 4, 3), 2.0, dtype=np.float32)
    other = reference.copy()
    other[0, 1, 2, 0] = np.nextafter(np.float32(2.0), np.float32(3.0))  # one float32 step
    stats = compare_layer("conv", reference, other)
    step = float(np.spacing(np.float32(2.0)))
    assert stats.shape == (2, 4, 4, 3) and stats.max_ulp == 1
    assert stats.max_abs == step and stats.mean_abs == pytest.approx(step / reference.size)
    assert stats.differing_fraction == 1 / reference.size
    assert stats.relative_error == pytest.approx(step / math.sqrt(4.0 * reference.size))
    assert stats.snr_db == pytest.approx(-20 * math.log10(stats.relative_error))
    assert stats.differs and stats.nan == (0, 0)


def test_equal_layers_have_infinite_snr_and_say_so_in_json() -> None:
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    stats = compare_layer("same", values, values.copy())
    assert not stats.differs and stats.relative_error == 0.0 and math.isinf(stats.snr_db)
    assert stats.to_dict()["snr_db"] is None and stats.to_dict()["shape"] == [3, 4]


def test_low_precision_layers_are_widened_exactly_and_nan_is_counted_apart() -> None:
    reference = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    other = reference.astype(ml_dtypes.bfloat16)  # exact: these are bfloat16 numbers
    assert not compare_layer("bf16", reference, other).differs
    broken = reference.copy()
    broken[1] = np.nan
    stats = compare_layer("nan", reference, broken)
    assert stats.nan == (0, 1) and stats.differs
    assert stats.max_abs == 0.0  # the NaN element takes no part in the arithmetic


def test_the_first_differing_layer_and_the_amplifying_ones_are_named() -> None:
    base = np.linspace(1.0, 2.0, 64, dtype=np.float32)

    def moved(relative: float) -> np.ndarray:
        return (base * np.float32(1.0 + relative)).astype(np.float32)

    layers = [
        ("input", base, base.copy()),
        ("conv1", base, moved(1e-5)),
        ("conv2", base, moved(1e-4)),  # ten times the previous layer's error
        ("out", base, moved(2e-4)),
    ]
    comparison = compare_layers(iter(layers))
    assert comparison.first_differing is not None
    assert comparison.first_differing.name == "conv1"
    (top, ratio), *_ = comparison.amplification()
    assert top.name == "conv2" and ratio == pytest.approx(10.0, rel=0.05)
    data = comparison.to_dict()
    assert data["first_differing"] == "conv1" and data["amplifying"][0]["layer"] == "conv2"
    assert [layer["name"] for layer in data["layers"]] == ["input", "conv1", "conv2", "out"]


def test_a_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="layer x: shapes differ"):
        compare_layer("x", np.zeros(3, np.float32), np.zeros(4, np.float32))
