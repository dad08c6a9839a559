"""What images will take in memory once decoded, said from their headers alone, and the bound
on what images held together may take (core/limits.py).

An image takes its decoded pixels and, while it is prepared, its float32 model input at its own
size (``prepare_input`` scales before it resizes; a model with free height and width keeps it
so). A run's child holds the inputs of its batch's images together, so the images of one batch
are counted together: eight images of 16384² RGBA filling a batch would take 40 GiB. A header
costs a few hundred bytes, where decoding a file whose header lies costs what it claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from segdiff_gui.core.limits import MemoryBound, image_memory_bound
from segdiff_gui.io.images import ImageHeader, read_header

__all__ = ["check_images_fit", "image_memory"]

_INPUT_ITEMSIZE = 4  # float32


def image_memory(header: ImageHeader) -> int:
    """Bytes of the decoded image and of its float32 model input at its own size."""
    return header.decoded_bytes + header.values * _INPUT_ITEMSIZE


def check_images_fit(groups: Iterable[Sequence[Path]]) -> None:
    """Refuse, from headers alone and before anything is decoded, a group of images held
    together (one batch's images, or one image alone) that would take more than the bound;
    the error names the file whose addition crosses it. Each file's header is read once."""
    bound: MemoryBound | None = None  # asked once there is an image: a cache hit has none
    taken: dict[Path, int] = {}
    for group in groups:
        for path in group:
            if path not in taken:
                taken[path] = image_memory(read_header(path))
        bound = bound or image_memory_bound()
        if sum(taken[path] for path in group) <= bound.limit:
            continue
        total = 0
        for count, path in enumerate(group):
            total += taken[path]
            if count == 0:
                what = "decoded, with its float32 model input, it"
            else:
                others = f"{count} image{'s' if count > 1 else ''}"
                what = f"held in one batch with the {others} before it, they"
            bound.check(path, total, what)
