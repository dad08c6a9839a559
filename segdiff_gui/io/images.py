"""Reading images: PNG/JPEG (8- and 16-bit) through Pillow, TIFF (any dtype) through tifffile,
NPY through numpy without pickles, each from a plain file and a TIFF from its own bytes only
(io/untrusted.py). Every failure is an :class:`InputError` naming the file. Ground-truth masks
are read here too (:func:`read_labels`), in the one bounded way."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import check_pixels, max_pixels, over_pixel_bound
from segdiff_gui.io.untrusted import decoding, npy_header, open_plain, open_tiff

__all__ = [
    "IMAGE_SUFFIXES",
    "PILLOW_FORMATS",
    "ImageHeader",
    "collect_images",
    "open_with_pillow",
    "read_header",
    "read_image",
    "read_labels",
]

_T = TypeVar("_T")

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".npy", ".bmp")
_PIL_MODES = {"1": "L", "P": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB", "HSV": "RGB"}


# The formats Pillow may decode for segdiff. Pillow picks a plugin from a file's bytes, not
# its name, and some start other programs (its EPS plugin runs Ghostscript on the PostScript
# inside): a file named .png is opened only as one of these.
PILLOW_FORMATS = ("PNG", "JPEG", "BMP", "TIFF")


_PILLOW_LIMIT = threading.Lock()


def open_with_pillow(path: Path, handle: IO[bytes]) -> Any:
    """``PIL.Image.open`` of ``path``'s open ``handle`` limited to :data:`PILLOW_FORMATS`
    (UnidentifiedImageError else), and to segdiff's pixel bound
    (:func:`~segdiff_gui.core.limits.max_pixels`), said in one line naming ``path``.

    Pillow checks a size against its process-wide ``Image.MAX_IMAGE_PIXELS`` when it opens a
    file, and refuses at twice it. segdiff's bound stands in for it during the open only, then
    the value the process had is put back: a notebook's own limit (or Pillow's default) still
    guards the notebook's own images."""
    from PIL import Image  # here: a cache hit decodes no image

    limit = max_pixels()
    with _PILLOW_LIMIT:
        before = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = limit
        try:
            return Image.open(handle, formats=PILLOW_FORMATS)
        except Image.DecompressionBombError:
            raise InputError(path, f"image is {over_pixel_bound(limit)}") from None
        finally:
            Image.MAX_IMAGE_PIXELS = before


class _NotAnImage(Exception):
    """Neither Pillow nor tifffile recognises the file's format."""


def _is_deep_colour_png(handle: IO[bytes]) -> bool:
    """16-bit PNG with colour or alpha, which Pillow decodes to 8 bits without a word."""
    header = handle.read(26)
    handle.seek(0)
    is_png = header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return is_png and header[24] == 16 and header[25] in (2, 4, 6)


def _read_with_pillow(path: Path, indices: bool = False) -> np.ndarray:
    """The image's pixels; with ``indices``, a palette image's indices instead of its colours."""
    # Imported here: a cache hit decodes no image, and Pillow's import is 12 ms of its 0.28 s.
    from PIL import UnidentifiedImageError

    with open_plain(path, "image") as handle:
        if _is_deep_colour_png(handle):
            raise InputError(
                path,
                "is a 16-bit colour PNG, which would be read with only 8 bits per channel; "
                "save it as a 16-bit TIFF",
            )
        try:
            opened = open_with_pillow(path, handle)
        except UnidentifiedImageError:
            raise _NotAnImage from None
        with opened as image:
            width, height = image.size
            check_pixels(path, height, width)
            image.load()
            mode = _PIL_MODES.get(image.mode)
            if image.mode == "P" and "transparency" not in image.info:
                mode = "RGB"
            if image.mode == "P" and indices:
                mode = None  # the classes, not their colours
            converted = image.convert(mode) if mode else image
            array = np.asarray(converted)
    if converted.mode.startswith("I;16"):
        array = array.astype(np.uint16)
    return array


def _read_with_tifffile(path: Path) -> np.ndarray:
    # Imported here: most sets are PNG, and tifffile is a twentieth of the CLI's start-up.
    import tifffile

    try:
        with open_tiff(path, "image") as tiff:
            if not tiff.series:
                raise _NotAnImage
            series = tiff.series[0]
            _check_declared_shape(path, tuple(series.shape))
            return np.asarray(series.asarray())
    except tifffile.TiffFileError:
        raise _NotAnImage from None


def _check_declared_shape(path: Path, shape: tuple[int, ...]) -> None:
    """Refuse, from a header, an image over the pixel bound (pages or channels included)."""
    sizes = sorted(shape, reverse=True)
    height, width = (sizes + [1, 1])[:2]
    check_pixels(path, height, width)
    values = int(np.prod(shape, dtype=np.float64))
    if values > 8 * max_pixels():
        raise InputError(path, f"declares {values:,} values (shape {list(shape)}), not an image")


def _read_npy(path: Path) -> np.ndarray:
    with open_plain(path, "image") as handle:
        _check_declared_shape(path, npy_header(handle)[0])
        handle.seek(0)
        loaded: np.ndarray = np.load(handle, allow_pickle=False)
    return loaded


@dataclass(frozen=True)
class ImageHeader:
    """What an image file declares, read before a byte of its pixels is decoded: its shape
    (channels included, as they are decoded) and the bytes of one value."""

    shape: tuple[int, ...]
    itemsize: int

    @property
    def values(self) -> int:
        return math.prod(self.shape)

    @property
    def decoded_bytes(self) -> int:
        return self.values * self.itemsize


def _pillow_header(path: Path) -> ImageHeader:
    from PIL import UnidentifiedImageError

    with open_plain(path, "image") as handle:
        try:
            opened = open_with_pillow(path, handle)
        except UnidentifiedImageError:
            raise _NotAnImage from None
        with opened as image:  # its header only: nothing is decoded before load()
            width, height = image.size
            mode = image.mode
            channels = 4 if mode == "P" else len(image.getbands())  # a palette may become RGBA
    itemsize = 4 if mode in ("I", "F") else 2 if mode.startswith("I;16") else 1
    return ImageHeader((height, width, channels), itemsize)


def _tiff_header(path: Path) -> ImageHeader:
    import tifffile

    try:
        with open_tiff(path, "image") as tiff:
            if not tiff.series:
                raise _NotAnImage
            series = tiff.series[0]
            return ImageHeader(tuple(series.shape), series.dtype.itemsize)
    except tifffile.TiffFileError:
        raise _NotAnImage from None


def _by_format(
    path: Path,
    npy: Callable[[Path], _T],
    tiff: Callable[[Path], _T],
    pillow: Callable[[Path], _T],
) -> _T:
    """Call the reader of ``path``'s format (by its suffix: ``.npy``, TIFF, else Pillow); a
    file that is missing, not a plain file, or that no reader can read is one line naming it.
    A decoder's warnings (a truncated file, an odd tag) would be raw lines on stderr: they are
    dropped."""
    suffix = path.suffix.lower()
    with decoding(path, "an image"):
        try:
            if suffix == ".npy":
                return npy(path)
            if suffix in (".tif", ".tiff"):
                return tiff(path)
            return pillow(path)
        except _NotAnImage:
            raise InputError(
                path, "not a readable image (PNG, JPEG, TIFF or NPY expected)"
            ) from None


def _npy_image_header(path: Path) -> ImageHeader:
    with open_plain(path, "image") as handle:
        shape, _, dtype = npy_header(handle)
    return ImageHeader(shape, dtype.itemsize)


def read_header(path: str | Path) -> ImageHeader:
    """The shape and value size ``path`` declares, read as :func:`read_image` would read the
    file but without decoding it; one over the pixel bound is refused here."""
    path = Path(path)
    header = _by_format(path, _npy_image_header, _tiff_header, _pillow_header)
    _check_declared_shape(path, header.shape)
    return header


def read_image(path: str | Path) -> np.ndarray:
    """Decode one image to H×W or H×W×C in its own dtype (uint8, uint16, float32 …)."""
    path = Path(path)
    return _pixels(path, _by_format(path, _read_npy, _read_with_tifffile, _read_with_pillow))


def read_labels(path: str | Path) -> np.ndarray:
    """A label map (a ground-truth mask), read as :func:`read_image` reads an image, but an
    indexed (palette) image keeps its indices, as VOC and Cityscapes ship their label maps:
    the palette's colours are for eyes, the indices are the classes."""
    path = Path(path)
    pillow = partial(_read_with_pillow, indices=True)
    return _pixels(path, _by_format(path, _read_npy, _read_with_tifffile, pillow))


def _pixels(path: Path, decoded: np.ndarray) -> np.ndarray:
    """A decoded array as H×W or H×W×C pixel values, or one line saying why it is not one."""
    array = np.asarray(decoded)
    if array.dtype == object or array.dtype.kind not in "uifb":
        raise InputError(path, f"holds {array.dtype} data, not pixel values")
    if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] not in (1, 3, 4):
        array = np.moveaxis(array, 0, -1)  # channels-first TIFF/NPY
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] > 4):
        raise InputError(path, f"has shape {array.shape}; expected H×W or H×W×C with C ≤ 4")
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    return array


def collect_images(paths: Sequence[str | Path]) -> list[Path]:
    """Expand directories to their image files (sorted by name) and keep files as given."""
    found: dict[Path, Path] = {}  # by resolved path: an image named twice is used once
    for entry in map(Path, paths):
        if entry.is_dir():
            inside = sorted(p for p in entry.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not inside:
                raise InputError(entry, "folder holds no images (PNG, JPEG, TIFF or NPY)")
        elif entry.exists():
            inside = [entry]
        else:
            raise InputError(entry, "no such file or folder")
        for path in inside:
            found.setdefault(path.resolve(), path)
    return list(found.values())
