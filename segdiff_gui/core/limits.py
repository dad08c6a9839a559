"""Bounds on what segdiff reads and runs, so that a crafted file or a typo cannot take the
machine's memory or an afternoon of CPU: each bound is checked from a header or a declared
shape before a byte of pixel data is decoded, and refused in one line that says how to raise it.

The pixel bound is the one a user may need to move (a whole-slide image, a satellite tile): it
is read from ``SEGDIFF_MAX_PIXELS`` so that the CLI, the window and a notebook share it. So is
the bound on what the images of one batch take in memory (``SEGDIFF_MAX_IMAGE_MEMORY``), which
is otherwise half of this machine's memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from segdiff_gui.core.errors import InputError

__all__ = [
    "MAX_BATCH",
    "MAX_BUNDLE_RUNS",
    "MAX_CHANNELS",
    "MAX_IMAGE_MEMORY_VARIABLE",
    "MAX_MODEL_BYTES",
    "MAX_MODEL_CONFIG_BYTES",
    "MAX_MODEL_FILES",
    "MAX_NAME_CHARS",
    "MAX_PIXELS_VARIABLE",
    "MAX_REPEATS",
    "MAX_SET_IMAGES",
    "MAX_SHARDS",
    "MAX_TEXT_BYTES",
    "MemoryBound",
    "check_pixels",
    "check_stored_bytes",
    "image_memory_bound",
    "max_pixels",
    "over_pixel_bound",
    "over_text_bound",
]

MAX_PIXELS_VARIABLE = "SEGDIFF_MAX_PIXELS"
MAX_IMAGE_MEMORY_VARIABLE = "SEGDIFF_MAX_IMAGE_MEMORY"
# 16384² pixels: four times the 8192² maps the benchmark suite opens; a float32 map this size
# is 1 GiB, which a laptop still holds twice.
DEFAULT_MAX_PIXELS = 16384 * 16384
# Softmax classes in a stored map, and image channels: far above any segmentation model's.
MAX_CHANNELS = 1024
# The batch is one tensor in the child: 4096 images is beyond any GPU's memory at 256².
MAX_BATCH = 4096
# Repeats exist to show nondeterminism; past this they only fill the disk.
MAX_REPEATS = 1000
# One text or JSON attribute of a stored run (a label, a config, the provenance's JSON), and
# one small file kept beside the runs (a test-set record, a remembered answer): measured in
# characters as stored, where JSON writes each character past ASCII as six
# (:func:`over_text_bound`, the one measure of writers and readers alike).
MAX_TEXT_BYTES = 1 << 20
# An image's or a map's name as a run or a test-set record keeps it: a file name or a path.
MAX_NAME_CHARS = 4096
# A test set (core/test_sets.py): the images one may hold, far beyond any sweep's, and the
# shards it may be cut into (a Kubernetes indexed Job's completions at most; a Slurm array is
# far fewer). A record past either is damage, never a set to count.
MAX_SET_IMAGES = 10_000_000
MAX_SHARDS = 100_000
# The runs one bundle may name: a sweep of 5,000 images at five configurations and two
# repeats. Each name is a run to read and check (milliseconds each): a crafted bundle of
# hundreds of thousands would take minutes before it could be refused.
MAX_BUNDLE_RUNS = 50_000
# A model, read whole to be hashed before it is trusted: a segmentation network of a few
# hundred MB, or a few GB with its optimizer, is far below; a crafted folder is not.
MAX_MODEL_BYTES = 64 << 30
MAX_MODEL_FILES = 100_000
# A .keras archive's config.json, which Keras parses whole into memory: real ones are kilobytes
# to a few MB (a thousand-layer network); a crafted one inflates a small zip to gigabytes.
MAX_MODEL_CONFIG_BYTES = 64 << 20


def over_text_bound(text: str) -> bool:
    """Whether ``text``, as stored (an attribute's text, JSON already escaped), is past
    :data:`MAX_TEXT_BYTES`: what a writer refuses to write and a reader refuses to read."""
    return len(text) > MAX_TEXT_BYTES


def _set_number(variable: str) -> int | None:
    """``$variable`` if it is a positive whole number (``_`` may group its digits)."""
    text = os.environ.get(variable, "").replace("_", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def max_pixels() -> int:
    """The pixel bound in force: ``$SEGDIFF_MAX_PIXELS`` if it is a positive whole number."""
    return _set_number(MAX_PIXELS_VARIABLE) or DEFAULT_MAX_PIXELS


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
            where, f"{what} of {height:,}×{width:,} pixels is {over_pixel_bound(limit)}"
        )


def over_pixel_bound(limit: int) -> str:
    """How a refusal by the pixel bound ``limit`` ends: the bound, and how to raise it."""
    return f"over segdiff's limit of {limit:,} pixels (set {MAX_PIXELS_VARIABLE} to raise it)"


@dataclass(frozen=True)
class MemoryBound:
    """The bytes the images of one batch may take, decoded with their float32 model inputs,
    and where that figure comes from (said in the refusal)."""

    limit: int
    source: str

    def check(self, where: object, needed: int, what: str) -> None:
        """Refuse images that would take ``needed`` bytes together (``what`` says which)."""
        if needed > self.limit:
            raise InputError(
                where,
                f"{what} would take {needed / 2**30:,.1f} GiB, over segdiff's bound of "
                f"{self.limit / 2**30:,.1f} GiB ({self.limit:,} bytes: {self.source}); use "
                f"fewer or smaller images in a batch, or set {MAX_IMAGE_MEMORY_VARIABLE} to "
                "raise it",
            )


def image_memory_bound() -> MemoryBound:
    """``$SEGDIFF_MAX_IMAGE_MEMORY``, or half of this machine's physical memory, which leaves
    the other half to the model, its runtime and the window. The whole memory, not what is
    free now: the same request is refused or not whatever else happens to run."""
    if (chosen := _set_number(MAX_IMAGE_MEMORY_VARIABLE)) is not None:
        return MemoryBound(chosen, f"set by {MAX_IMAGE_MEMORY_VARIABLE}")
    import psutil  # here: only a request that decodes images asks

    total = int(psutil.virtual_memory().total)
    return MemoryBound(total // 2, f"half of this machine's {total / 2**30:,.1f} GiB of memory")
