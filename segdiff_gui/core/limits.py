"""Bounds on what segdiff reads and runs, so that a crafted file or a typo cannot take the
machine's memory or an afternoon of CPU: each bound is checked from a header or a declared
shape before a byte of pixel data is decoded, and refused in one line that says how to raise it.

The pixel bound is the one a user may need to move (a whole-slide image, a satellite tile): it
is read from ``SEGDIFF_MAX_PIXELS`` so that the CLI, the window and a notebook share it.
"""

from __future__ import annotations

import os

from segdiff_gui.core.errors import InputError

__all__ = [
    "MAX_BATCH",
    "MAX_CHANNELS",
    "MAX_MODEL_BYTES",
    "MAX_MODEL_CONFIG_BYTES",
    "MAX_MODEL_FILES",
    "MAX_PIXELS_VARIABLE",
    "MAX_REPEATS",
    "MAX_TEXT_BYTES",
    "check_pixels",
    "check_stored_bytes",
    "max_pixels",
]

MAX_PIXELS_VARIABLE = "SEGDIFF_MAX_PIXELS"
# 16384² pixels: four times the 8192² maps the benchmark suite opens; a float32 map this size
# is 1 GiB, which a laptop still holds twice.
DEFAULT_MAX_PIXELS = 16384 * 16384
# Softmax classes in a stored map, and image channels: far above any segmentation model's.
MAX_CHANNELS = 1024
# The batch is one tensor in the child: 4096 images is beyond any GPU's memory at 256².
MAX_BATCH = 4096
# Repeats exist to show nondeterminism; past this they only fill the disk.
MAX_REPEATS = 1000
# One text or JSON attribute of a stored run (a label, a config, the provenance's JSON).
MAX_TEXT_BYTES = 1 << 20
# A model, read whole to be hashed before it is trusted: a segmentation network of a few
# hundred MB, or a few GB with its optimizer, is far below; a crafted folder is not.
MAX_MODEL_BYTES = 64 << 30
MAX_MODEL_FILES = 100_000
# A .keras archive's config.json, which Keras parses whole into memory: real ones are kilobytes
# to a few MB (a thousand-layer network); a crafted one inflates a small zip to gigabytes.
MAX_MODEL_CONFIG_BYTES = 64 << 20


def max_pixels() -> int:
    """The pixel bound in force: ``$SEGDIFF_MAX_PIXELS`` if it is a positive whole number."""
    text = os.environ.get(MAX_PIXELS_VARIABLE, "").replace("_", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return DEFAULT_MAX_PIXELS


def check_stored_bytes(where: object, shape: tuple[int, ...], itemsize: int, what: str) -> None:
    """Refuse a stored array (a softmax map's classes, an image's channels and value type
    included) whose bytes are over twice the pixel bound's float32 map: 2 GiB by default (a
    16384² sigmoid map, an 8192² map of 8 classes). A crafted file declares such a size in a
    few bytes."""
    if len(shape) >= 2:  # a layer's output may be a vector
        check_pixels(where, shape[0], shape[1], what)
    size = itemsize
    for extent in shape:
        size *= extent
    limit = 2 * 4 * max_pixels()
    if size > limit:
        raise InputError(
            where,
            f"{what} of shape {list(shape)} holds {size / 2**30:,.1f} GiB, over segdiff's limit "
            f"of {limit / 2**30:,.1f} GiB (set {MAX_PIXELS_VARIABLE} to raise it)",
        )


def check_pixels(where: object, height: int, width: int, what: str = "image") -> None:
    """Refuse an image or map larger than the pixel bound, before it is decoded."""
    limit = max_pixels()
    if height * width > limit:
        raise InputError(
            where,
            f"{what} of {height:,}×{width:,} pixels is over segdiff's limit of {limit:,} "
            f"pixels (set {MAX_PIXELS_VARIABLE} to raise it)",
        )
