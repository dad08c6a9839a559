"""Flip masks out (and back in, for checking): PNG 0/255 8-bit, TIFF 0/255 8-bit, NPY bool."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile
from PIL import Image

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.images import read_image

__all__ = ["MASK_SUFFIXES", "read_mask", "write_mask"]

MASK_SUFFIXES = (".png", ".tif", ".tiff", ".npy")


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in MASK_SUFFIXES:
        raise InputError(path, "mask files end in .png, .tif, .tiff or .npy")
    return suffix


def write_mask(path: str | Path, mask: np.ndarray) -> Path:
    """Write a boolean H×W mask: 255 where true in images (visible in any viewer)."""
    path = Path(path)
    suffix = _suffix(path)
    boolean = np.asarray(mask, dtype=bool)
    if boolean.ndim != 2:
        raise ValueError(f"a mask is H×W, not {boolean.shape}")
    if suffix == ".npy":
        np.save(path, boolean, allow_pickle=False)
    elif suffix == ".png":
        Image.fromarray(boolean.astype(np.uint8) * 255).save(path)
    else:
        tifffile.imwrite(path, boolean.astype(np.uint8) * 255, compression="zlib")
    return path


def read_mask(path: str | Path) -> np.ndarray:
    """Read a mask written by :func:`write_mask` back as booleans."""
    path = Path(path)
    _suffix(path)
    return np.asarray(read_image(path)) > 0
