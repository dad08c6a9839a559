"""Colour maps for pictures in reports, in numpy (the GUI uses pyqtgraph's own)."""

from __future__ import annotations

import numpy as np

__all__ = ["diverging", "viridis"]

# Polynomial fit of matplotlib's viridis (Matt Zucker, 2019): within 1/255 of the original.
_VIRIDIS = np.array(
    [
        [0.2777273272234177, 0.005407344544966578, 0.3340998053353061],
        [0.1050930431085774, 1.404613529898575, 1.384590162594685],
        [-0.3308618287255563, 0.214847559468213, 0.09509516302823659],
        [-4.634230498983486, -5.799100973351585, -19.33244095627987],
        [6.228269936347081, 14.17993336680509, 56.69055260068105],
        [4.776384997670288, -13.74514537774601, -65.35303263337234],
        [-5.435455855934631, 4.645852612178535, 26.3124352495832],
    ]
)
_BLUE = np.array([0.230, 0.299, 0.754])
_WHITE = np.array([0.865, 0.865, 0.865])
_RED = np.array([0.706, 0.016, 0.150])


def _to_rgb8(colours: np.ndarray) -> np.ndarray:
    rgb: np.ndarray = (np.clip(colours, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    return rgb


def viridis(values: np.ndarray, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """H×W values → H×W×3 uint8, fixed levels so pictures of different runs compare."""
    t = np.clip((np.nan_to_num(values, nan=low) - low) / ((high - low) or 1.0), 0.0, 1.0)
    colours = np.zeros((*t.shape, 3))
    for coefficients in _VIRIDIS[::-1]:
        colours = colours * t[..., None] + coefficients
    return _to_rgb8(colours)


def diverging(values: np.ndarray, limit: float) -> np.ndarray:
    """Signed values → blue (negative), grey-white (zero), red (positive); ±limit saturate."""
    t = np.clip(np.nan_to_num(values) / (limit or 1.0), -1.0, 1.0)[..., None]
    colours = np.where(t < 0, _WHITE + (_BLUE - _WHITE) * -t, _WHITE + (_RED - _WHITE) * t)
    return _to_rgb8(colours)
