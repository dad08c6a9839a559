"""An input image as a picture for people to look at: the image list's thumbnails and the
report's picture of the flips over the input. Its colours are kept (an RGB photo is not shown
in grey), and any dtype is stretched to its own range so that a dim 16-bit or float image
shows."""

from __future__ import annotations

import numpy as np

__all__ = ["picture_rgb"]


def picture_rgb(image: np.ndarray, brightest: int = 255) -> np.ndarray:
    """``image`` (H×W or H×W×C of any dtype) as 8-bit RGB, H×W×3: the first three channels of
    a colour image (a fourth is alpha), the first of a grey one (a second is alpha), in grey.
    Its darkest value becomes 0 and its brightest ``brightest``, one range for all channels
    so that hues stay as they are; a value that is not finite is black."""
    if image.ndim == 3:
        image = image[..., :3] if image.shape[-1] >= 3 else image[..., 0]
    data = image.astype(np.float32)  # exact for 8- and 16-bit images; enough to look at
    finite = np.isfinite(data)
    values = data if finite.all() else data[finite]
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    data -= low
    data *= brightest / ((high - low) or 1.0)
    data[~finite] = 0.0
    np.clip(data, 0, brightest, out=data)
    picture = data.astype(np.uint8)
    if picture.ndim == 2:
        picture = np.repeat(picture[..., None], 3, axis=-1)
    return np.ascontiguousarray(picture)
