import numpy as np
import pytest

from segdiff_gui.core.config import Preprocessing, parse_preprocessing
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.preprocess import prepare_input, resize_bilinear


def test_scale_follows_dtype_unless_given():
    image8 = np.full((4, 4), 255, dtype=np.uint8)
    image16 = np.full((4, 4), 65535, dtype=np.uint16)
    assert prepare_input(image8, Preprocessing(), 4, 4, 1, "a").max() == 1.0
    assert prepare_input(image16, Preprocessing(), 4, 4, 1, "a").max() == 1.0
    assert prepare_input(image8, Preprocessing(scale=1.0), 4, 4, 1, "a").max() == 255.0


def test_mean_std_and_gray_conversion():
    rgb = np.zeros((2, 2, 3), dtype=np.uint8)
    rgb[..., 0] = 255
    gray = prepare_input(rgb, Preprocessing(color="gray"), 2, 2, 1, "a")
    assert gray.shape == (2, 2, 1) and gray[0, 0, 0] == pytest.approx(0.299)
    normalised = prepare_input(rgb, Preprocessing(mean=(0.5,), std=(0.5,)), 2, 2, 3, "a")
    assert normalised[0, 0].tolist() == [1.0, -1.0, -1.0]


def test_channel_mismatch_names_the_file():
    rgb = np.zeros((4, 4, 3), dtype=np.uint8)
    with pytest.raises(InputError, match=r"cells/a.png: model expects 1 channel\(s\), image has 3"):
        prepare_input(rgb, Preprocessing(), 4, 4, 1, "cells/a.png")


def test_size_mismatch_is_refused_with_both_shapes_or_resized():
    image = np.zeros((10, 12), dtype=np.uint8)
    with pytest.raises(InputError, match="image is 10×12×1 but the model expects 8×8×1"):
        prepare_input(image, Preprocessing(), 8, 8, 1, "x.png")
    resized = prepare_input(image, Preprocessing(resize="bilinear"), 8, 8, 1, "x.png")
    assert resized.shape == (8, 8, 1)


def test_bilinear_resize_keeps_constants_and_halves_exactly():
    constant = np.full((5, 7, 1), 0.25, dtype=np.float32)
    assert np.all(resize_bilinear(constant, 9, 3) == np.float32(0.25))
    ramp = np.arange(4, dtype=np.float32).reshape(1, 4, 1).repeat(2, axis=0)
    assert resize_bilinear(ramp, 2, 2)[0, :, 0].tolist() == [0.5, 2.5]


def test_mean_with_the_wrong_number_of_channels_is_one_clear_line():
    with pytest.raises(InputError, match=r"a.png: the mean has 3 values but the model input has 1"):
        prepare_input(np.zeros((2, 2), np.uint8), Preprocessing(mean=(0.5,) * 3), 2, 2, 1, "a.png")


def test_first_line_skips_tensorflows_header():
    from segdiff_gui.core.errors import first_line

    traced = ValueError("in user code:\n\n  File x, line 3\n\n  ValueError: shapes differ")
    assert first_line(traced) == "ValueError: shapes differ"
    assert first_line(RuntimeError("boom\nmore")) == "boom"


def test_the_default_divides_as_a_users_script_does_and_scale_multiplies():
    """``img.astype(np.float32) / 255.0`` is what users write; multiplying by
    float32(1/255) (Keras's Rescaling) rounds 126 of the 256 byte values differently."""
    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    divided = prepare_input(pixels, Preprocessing(), None, None, None, "x.png")[..., 0]
    assert divided.tobytes() == (pixels.astype(np.float32) / 255.0).tobytes()
    explicit = prepare_input(pixels, parse_preprocessing(divide="255"), None, None, None, "x")
    assert explicit.tobytes() == divided[..., None].tobytes()
    multiplied = prepare_input(pixels, parse_preprocessing("1/255"), None, None, None, "x")[..., 0]
    assert multiplied.tobytes() == (pixels.astype(np.float32) * np.float32(1 / 255)).tobytes()
    assert np.count_nonzero(multiplied != divided) == 126
    wide = np.array([[0, 1, 40000, 65535]], dtype=np.uint16)
    by_dtype = prepare_input(wide, Preprocessing(), None, None, None, "x.tif")[..., 0]
    assert by_dtype.tobytes() == (wide.astype(np.float32) / 65535.0).tobytes()


def test_runs_stored_before_the_divisor_keep_their_key_and_their_multiplication():
    stored = {"scale": None, "mean": [], "std": [], "color": "keep", "resize": "refuse"}
    old = Preprocessing.from_dict(stored)
    assert old.by_dtype == "multiply" and old.to_dict() == stored
    assert Preprocessing().to_dict() == {**stored, "by_dtype": "divide"}  # another key
    assert Preprocessing(scale=0.5).to_dict() == {**stored, "scale": 0.5}  # unchanged keys
    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    back = prepare_input(pixels, old, None, None, None, "x")[..., 0]
    assert back.tobytes() == (pixels.astype(np.float32) * np.float32(1 / 255)).tobytes()
    assert old.scaling_text() == "x * (1 / dtype max)"
    assert Preprocessing().scaling_text() == "x / dtype max"


def test_a_scale_and_a_divisor_together_are_refused():
    with pytest.raises(ConfigError, match="not both"):
        parse_preprocessing("1/255", divide="255")
    with pytest.raises(ConfigError, match="divide must be a positive number"):
        parse_preprocessing(divide="0")
