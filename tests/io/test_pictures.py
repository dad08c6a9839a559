"""An input image as people see it: an RGB photo stays in colour in the
report's picture of the flips (and in the window's thumbnails, tests/ui/test_panels.py)."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
from PIL import Image

from segdiff_gui.io.html_report import write_html_report
from segdiff_gui.io.pictures import picture_rgb
from segdiff_gui.io.reports import report_data
from tests.factories import seed_study

RED, GREEN, BLUE = (200, 30, 20), (20, 180, 40), (30, 40, 210)


def colour_stripes(height: int, width: int) -> np.ndarray:
    """Red, green and blue stripes, top to bottom."""
    image = np.zeros((height, width, 3), np.uint8)
    third = height // 3
    image[:third], image[third : 2 * third], image[2 * third :] = RED, GREEN, BLUE
    return image


def test_a_colour_image_keeps_its_hues_and_any_dtype_is_stretched_to_its_range():
    stripes = colour_stripes(6, 4)
    picture = picture_rgb(stripes)
    assert picture.dtype == np.uint8 and picture.shape == (6, 4, 3)
    # One range for every channel: red stays red, green green, blue blue.
    assert picture[0, 0].argmax() == 0 and picture[2, 0].argmax() == 1
    assert picture[5, 0].argmax() == 2
    assert picture.min() == 0 and picture.max() == 255
    # A dim 16-bit RGB TIFF's values, and RGBA (alpha is not a colour): the same picture.
    dim = stripes.astype(np.uint16) * 3 + 1000
    assert np.array_equal(picture_rgb(dim), picture)
    alpha = np.concatenate([stripes, np.full((6, 4, 1), 255, np.uint8)], axis=-1)
    assert np.array_equal(picture_rgb(alpha), picture)
    # A grey image (with alpha: mode LA) is grey; a float one's NaN is black.
    grey = np.stack([np.arange(24, dtype=np.float32).reshape(6, 4), np.ones((6, 4))], -1)
    grey[0, 0, 0] = np.nan
    shown = picture_rgb(grey)
    assert np.array_equal(shown[..., 0], shown[..., 2]) and tuple(shown[0, 0]) == (0, 0, 0)
    assert tuple(shown[5, 3]) == (255, 255, 255)
    assert tuple(picture_rgb(np.full((2, 2), 7, np.uint8))[0, 0]) == (0, 0, 0)  # flat


def _pictures(html: str) -> list[np.ndarray]:
    return [
        np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
        for data in re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    ]


def test_the_report_shows_an_rgb_input_in_colour_under_the_flips(tmp_path):
    study = seed_study()  # 4×5 maps, one flip at row 1, column 2
    data = report_data(study, {}, {"model": "m.keras", "image": "photo.png"})
    stripes = colour_stripes(6, 5)[1:5]  # 4 rows: red, green, green, blue
    html = write_html_report(tmp_path / "r.html", data, study, stripes).read_text()
    *_, picture = _pictures(html)  # the input image, the flips over it
    assert picture.shape == (4, 5, 3)
    assert tuple(picture[1, 2]) == (255, 0, 40)  # the flip, marked
    red, green, blue = picture[0, 0], picture[2, 0], picture[3, 0]
    assert red.argmax() == 0 and green.argmax() == 1 and blue.argmax() == 2
    assert red[0] - red[1:].max() > 100  # coloured, not grey
    # An image the model resized shows at the map's size, still in colour.
    large = np.repeat(np.repeat(stripes, 4, axis=0), 4, axis=1)
    html = write_html_report(tmp_path / "s.html", data, study, large).read_text()
    *_, picture = _pictures(html)
    assert picture.shape == (4, 5, 3) and picture[3, 0].argmax() == 2
