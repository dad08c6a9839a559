"""Views hand pyqtgraph colour indices instead of floats: the picture must not change."""

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage

from segdiff_gui.ui.level_indices import COLOURS, level_indices


def rendered(image: np.ndarray, levels, lut) -> QImage:
    item = pg.ImageItem(axisOrder="row-major")
    item.setImage(image, levels=levels, lut=lut, autoLevels=False)
    item.render()
    return item.qimage.convertToFormat(QImage.Format.Format_ARGB32)


@pytest.mark.parametrize(
    ("colour_map", "levels"),
    [("viridis", (0.0, 1.0)), ("CET-D1", (-3e-7, 3e-7)), ("inferno", (0.0, 5.3))],
)
def test_indices_draw_the_same_picture_as_the_floats(qapp, colour_map, levels):
    rng = np.random.default_rng(0)
    low, high = levels
    # Values beyond both levels too: they must clip to the end colours in both pictures.
    plane = (rng.random((300, 200)) * 1.4 - 0.2) * (high - low) + low
    plane = plane.astype(np.float32)
    lut = pg.colormap.get(colour_map).getLookupTable(nPts=COLOURS)
    indices = level_indices(plane, levels)
    assert indices is not None and indices.dtype == np.uint8
    assert rendered(indices, (0, COLOURS - 1), lut) == rendered(plane, levels, lut)


def test_a_plane_with_nan_is_left_to_pyqtgraph():
    plane = np.zeros((4, 4), dtype=np.float32)
    plane[1, 2] = np.nan
    assert level_indices(plane, (0.0, 1.0)) is None


@pytest.mark.parametrize(
    ("shape", "factor"),
    [((64, 64), 1), ((64, 64), 2), ((64, 64), 8), ((37, 50), 4), ((37, 50), 2), ((37, 50), 8),
     ((37, 50), 16), ((70, 130), 32), ((40, 50), 64)],
)  # fmt: skip
def test_pooling_marks_every_block_that_holds_a_set_pixel(shape, factor):
    from segdiff_gui.ui.level_indices import pooled_any

    mask = np.zeros(shape, dtype=bool)
    mask[5, 7] = mask[36, 49] = mask[0, 0] = True
    pooled = pooled_any(mask, factor)
    rows, columns = -(-shape[0] // factor), -(-shape[1] // factor)
    assert pooled.shape == (rows, columns)
    padded = np.zeros((rows * factor, columns * factor), dtype=bool)
    padded[: shape[0], : shape[1]] = mask
    expected = padded.reshape(rows, factor, columns, factor).any(axis=(1, 3))
    assert np.array_equal(pooled, expected)
