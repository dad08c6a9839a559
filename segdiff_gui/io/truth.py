"""Ground-truth masks for a test set, found by file name.

A mask belongs to an image when its stem is the image's stem, optionally followed by ``_mask``
or ``_gt`` (``cell_07.png`` ↔ ``masks/cell_07.png``, ``cell_07_mask.tif`` …), in any image
format segdiff reads. A binary model's mask counts nonzero pixels as foreground (0/1 and 0/255
both work); a multi-class model's mask holds the class index of every pixel.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.images import IMAGE_SUFFIXES, read_image, read_labels

__all__ = ["TruthFolder"]

_SUFFIXES = ("", "_mask", "_gt")


class TruthFolder:
    """The masks of one folder, looked up by image name."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise InputError(self.folder, "no such folder of ground-truth masks")
        self._by_stem: dict[str, Path] = {}
        for path in sorted(self.folder.iterdir()):
            if path.suffix.lower() in IMAGE_SUFFIXES:
                self._by_stem.setdefault(path.stem, path)
        if not self._by_stem:
            raise InputError(self.folder, "holds no mask images (PNG, TIFF or NPY)")

    def path_for(self, image_name: str) -> Path | None:
        stem = Path(image_name).stem
        for suffix in _SUFFIXES:
            if stem + suffix in self._by_stem:
                return self._by_stem[stem + suffix]
        return None

    def check_images(self, images: Sequence[Path]) -> None:
        """Before any inference: some mask must match an image, and each mask found must have
        its image's size (the map's size unless the model resizes)."""
        matched = 0
        for image in images:
            path = self.path_for(image.name)
            if path is None:
                continue
            matched += 1
            mask_shape, image_shape = read_labels(path).shape[:2], read_image(image).shape[:2]
            if mask_shape != image_shape:
                raise InputError(
                    path,
                    f"is {mask_shape[0]}×{mask_shape[1]} but its image {image.name} is "
                    f"{image_shape[0]}×{image_shape[1]}",
                )
        if not matched:
            raise self.matches_none()

    def matches_none(self) -> InputError:
        """The one line for a folder none of whose masks is named as an image of the sweep,
        whether found before any run (:meth:`check_images`) or once the maps are read."""
        return InputError(self.folder, "holds no mask whose name matches an image of the sweep")

    def read(self, image_name: str, shape: tuple[int, int], classes: int) -> np.ndarray | None:
        """The label map for ``image_name`` (``None`` when the folder has no mask for it),
        checked against the map's ``shape`` and the model's number of ``classes``."""
        path = self.path_for(image_name)
        if path is None:
            return None
        mask = read_labels(path)  # as images are read: a plain file, within the bounds
        if mask.ndim == 3:
            if not all(np.array_equal(mask[..., 0], mask[..., c]) for c in range(mask.shape[-1])):
                raise InputError(path, "is a colour image; a mask holds one label per pixel")
            mask = mask[..., 0]
        if mask.shape != shape:
            raise InputError(
                path, f"is {mask.shape[0]}×{mask.shape[1]} but the maps are {shape[0]}×{shape[1]}"
            )
        if mask.dtype.kind == "f" and not np.array_equal(mask, np.round(mask)):
            raise InputError(path, "holds fractional values; a mask holds whole class labels")
        labels: np.ndarray = mask.astype(np.int64)
        if classes <= 2:
            foreground: np.ndarray = (labels != 0).astype(np.int64)
            return foreground
        if labels.min() < 0 or labels.max() >= classes:
            raise InputError(
                path,
                f"holds labels {int(labels.min())}…{int(labels.max())} but the model has "
                f"{classes} classes (0…{classes - 1})",
            )
        return labels
