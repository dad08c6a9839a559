"""Probability maps from the user's own pipeline (``segdiff import``, ``reproduce``): ``.npy``,
``.npz`` (one map per member) and float TIFF, read as untrusted data, each refusal one line
naming the file.

A map file is opened by its headers first (:func:`open_maps`): what each array declares (its
shape, its dtype) is checked before a byte of its values is read, and each is read only when
asked, once its shape has been checked against the model's map (:func:`maps_in`): an ``.npz``
of a few megabytes may declare gigabytes. A map is float32 H×W (one sigmoid channel) or H×W×C
(softmax), or a batch of them (N first); a float64 map is rounded to float32 (said), a float16
one widened exactly; an integer, boolean or object array is refused (an ``.npy`` of Python
objects is never unpickled), and so is a map that is not finite or not within [0, 1], whether
it comes from a file or as an array (:meth:`MapFile.of_array`). A file is read from its own
bytes only (io/untrusted.py), and a damaged one is one line.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import check_stored_bytes
from segdiff_gui.core.text import printable, shape_text
from segdiff_gui.io.untrusted import decoding, npy_header, open_plain, open_tiff

__all__ = [
    "MAP_SUFFIXES",
    "DeclaredMap",
    "MapFile",
    "UserMap",
    "fit_to_map_shape",
    "maps_in",
    "open_maps",
    "target_map",
]

MAP_SUFFIXES = (".npy", ".npz", ".tif", ".tiff")
_MAX_MEMBERS = 4096
_CHUNK = 16 << 20  # what a member's values are read by: a zip member is copied per read


@dataclass(frozen=True)
class UserMap:
    """One array of a map file: its member name in an ``.npz`` ("" otherwise), its values as
    float32, and what its dtype was (``float64`` is rounded to float32)."""

    name: str
    values: np.ndarray
    source_dtype: str

    @property
    def rounded(self) -> bool:
        return self.source_dtype == "float64"


@dataclass(frozen=True)
class DeclaredMap:
    """One array of a map file as its header declares it, before a byte of its values is read:
    its member name in an ``.npz`` ("" otherwise), its shape, and its dtype (a float one)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran_order: bool = False


def _checked_dtype(where: str, dtype: np.dtype[Any]) -> None:
    if dtype.hasobject:
        raise InputError(where, "holds Python objects (object dtype); segdiff never unpickles")
    if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
        raise InputError(
            where, f"is {dtype}; a probability map is float32 (float64 is rounded to float32)"
        )


def _declared(where: str, name: str, shape: tuple[int, ...], dtype: np.dtype[Any],
              fortran_order: bool = False) -> DeclaredMap:  # fmt: skip
    _checked_dtype(where, dtype)
    check_stored_bytes(where, shape, dtype.itemsize, "map")
    return DeclaredMap(name, tuple(int(n) for n in shape), dtype, fortran_order)


def _user_map(where: str, array: np.ndarray, name: str = "") -> UserMap:
    """The one check of a map's values, from a file or given as an array: a float dtype,
    finite, within [0, 1]; as float32."""
    _checked_dtype(where, array.dtype)
    source = str(array.dtype.newbyteorder("="))
    values = np.ascontiguousarray(array, dtype=np.float32)
    finite = np.isfinite(values)
    if not finite.all():
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise InputError(
            where,
            f"holds {int(np.count_nonzero(~finite)):,} NaN or infinite values (the first at "
            f"index {list(first)}); a probability map is finite",
        )
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if low < 0.0 or high > 1.0:
        raise InputError(
            where,
            f"values span [{low:.4g}, {high:.4g}]: not probabilities (apply the model's "
            "sigmoid or softmax first)",
        )
    return UserMap(name, values, source)


# .npy, alone or as an .npz's member -----------------------------------------------------------
def _npy_header(handle: IO[bytes], where: str, name: str = "") -> DeclaredMap:
    try:
        shape, fortran_order, dtype = npy_header(handle)
    except ValueError as error:
        raise InputError(where, f"is not a .npy array: {error}") from None
    return _declared(where, name, shape, dtype, fortran_order)


def _npy_values(handle: IO[bytes], where: str, declared: DeclaredMap) -> np.ndarray:
    """The values after a header that declares what ``declared`` says (read again: the file
    may have changed since), read in chunks: exactly as many bytes as it declares."""
    header = _npy_header(handle, where, declared.name)
    if header != declared:
        raise InputError(where, "changed while it was read")
    size = math.prod(declared.shape) * declared.dtype.itemsize
    buffer = bytearray(size)
    view, filled = memoryview(buffer), 0
    while filled < size:
        got = handle.readinto(view[filled : filled + _CHUNK])  # type: ignore[attr-defined]
        if not got:
            raise InputError(where, f"holds {filled:,} of the {size:,} bytes its header declares")
        filled += got
    if handle.read(1):  # and, in an .npz, the member's checksum is checked at its end
        raise InputError(where, "holds more bytes than its header declares")
    values = np.frombuffer(buffer, dtype=declared.dtype)
    return values.reshape(declared.shape, order="F" if declared.fortran_order else "C")


def _member_name(info: zipfile.ZipInfo) -> str:
    return printable(info.filename.removesuffix(".npy"))[:200]


def _members(archive: zipfile.ZipFile, path: Path) -> list[zipfile.ZipInfo]:
    """The archive's members, each stored or deflated as numpy writes them: another method
    (bzip2 inflates a few KB to gigabytes at once, where deflate is read a few KB at a time)
    or an encrypted member is refused from the zip directory, before a byte of it is read."""
    members = [info for info in archive.infolist() if not info.is_dir()]
    if not members:
        raise InputError(path, "holds no array")
    if len(members) > _MAX_MEMBERS:
        raise InputError(path, f"holds {len(members):,} members, over {_MAX_MEMBERS:,}")
    for info in members:
        where = f"{path} [{_member_name(info)}]"
        if info.flag_bits & 0x1:
            raise InputError(where, "is encrypted; numpy writes an .npz's members in the clear")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise InputError(
                where,
                f"is compressed by zip method {info.compress_type}; numpy stores or deflates "
                "an .npz's members",
            )
    return members


@contextmanager
def _npz(path: Path) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]]:
    with open_plain(path, "map") as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError) as error:
            raise InputError(path, f"is not a .npz archive: {error}") from None
        with archive:
            yield archive, _members(archive, path)


def _declare_npy(path: Path) -> list[DeclaredMap]:
    with open_plain(path, "map") as handle:
        return [_npy_header(handle, str(path))]


def _declare_npz(path: Path) -> list[DeclaredMap]:
    """Each member's header only: a member is opened and its first few KB inflated, never
    more (its header is a few hundred bytes; what follows may inflate to gigabytes)."""
    declared = []
    with _npz(path) as (archive, members):
        for info in members:
            name = _member_name(info)
            where = f"{path} [{name}]"
            with decoding(where, "a map"), archive.open(info) as handle:
                declared.append(_npy_header(handle, where, name))
    return declared


def _declare_tiff(path: Path) -> list[DeclaredMap]:
    return [_tiff_map(path, with_values=False)[0]]


def _tiff_map(path: Path, with_values: bool) -> tuple[DeclaredMap, np.ndarray | None]:
    """What the TIFF's first series declares, and its values where asked."""
    import tifffile  # here: most maps are .npy

    try:
        with open_tiff(path, "map") as tiff:
            if not tiff.series:
                raise InputError(path, "holds no image")
            series = tiff.series[0]
            declared = _declared(str(path), "", tuple(series.shape), np.dtype(series.dtype))
            return declared, np.asarray(series.asarray()) if with_values else None
    except tifffile.TiffFileError as error:
        raise InputError(path, f"is not a readable TIFF: {error}") from None


_DECLARE: dict[str, Callable[[Path], list[DeclaredMap]]] = {
    ".npy": _declare_npy,
    ".npz": _declare_npz,
    ".tif": _declare_tiff,
    ".tiff": _declare_tiff,
}


@dataclass(frozen=True)
class MapFile:
    """A map file's arrays as their headers declare them (or one array given as it is, the
    API's); each is read, and its values checked, only when asked (:meth:`read`)."""

    where: str  # the file, as the user named it
    declared: tuple[DeclaredMap, ...]
    path: Path | None = None
    array: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def of_array(cls, where: str, array: np.ndarray) -> MapFile:
        """An array given as it is, checked as a file's array is."""
        declared = _declared(where, "", tuple(array.shape), array.dtype)
        return cls(where, (declared,), array=array)

    def label(self, index: int) -> str:
        """Where the ``index``-th array is, in a line: the file, and its member's name."""
        name = self.declared[index].name
        return f"{self.where} [{name}]" if name else self.where

    def read(self, index: int) -> UserMap:
        """The ``index``-th array's values, checked (float, finite, within [0, 1]) as float32;
        a file that no longer declares what it did, or whose bytes are damaged, is one line."""
        declared, where = self.declared[index], self.label(index)
        if self.array is not None:
            return _user_map(where, self.array)
        assert self.path is not None
        with decoding(where, "a map"):
            values = self._values(self.path, index, declared, where)
        return _user_map(where, values, declared.name)

    def _values(self, path: Path, index: int, declared: DeclaredMap, where: str) -> np.ndarray:
        suffix = path.suffix.lower()
        if suffix == ".npy":
            with open_plain(path, "map") as handle:
                return _npy_values(handle, where, declared)
        if suffix == ".npz":
            with _npz(path) as (archive, members):
                if index >= len(members) or _member_name(members[index]) != declared.name:
                    raise InputError(where, "changed while it was read")
                with archive.open(members[index]) as member:
                    return _npy_values(member, where, declared)
        header, array = _tiff_map(path, with_values=True)
        if header != declared or array is None:
            raise InputError(where, "changed while it was read")
        return array


def open_maps(path: str | Path) -> MapFile:
    """``path``'s arrays as their headers declare them (one, or an ``.npz``'s members in their
    order), each a float array within segdiff's bounds; nothing of their values is read."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _DECLARE:
        open_plain(path, "map").close()  # a missing file is said as missing
        raise InputError(path, f"is not a map file ({', '.join(MAP_SUFFIXES)} expected)")
    with decoding(path, "a map"):
        declared = _DECLARE[suffix](path)
    return MapFile(str(path), tuple(declared), path)


def maps_in(where: str, shape: tuple[int, ...], expected: tuple[int, ...]) -> int:
    """How many maps of the model's ``expected`` shape (H×W or H×W×C) an array of ``shape``
    holds: one, or a batch of them (N first); a single channel may be kept (H×W×1) and a batch
    of one given as (1, …). Any other shape is the one line that refuses it."""
    if shape == expected or (len(expected) == 2 and shape == (*expected, 1)):
        return 1
    if len(shape) == len(expected) + 1 and shape[1:] == expected:
        return shape[0]
    if len(expected) == 2 and len(shape) == 4 and shape[1:] == (*expected, 1):
        return shape[0]
    wanted = shape_text(expected)
    raise InputError(
        where,
        f"has shape {shape_text(shape)}; the model's map is {wanted} (or N×{wanted} "
        "for a batch of N images)",
    )


def fit_to_map_shape(where: str, values: np.ndarray, expected: tuple[int, ...]) -> list[np.ndarray]:
    """``values`` as maps of shape ``expected``, as :func:`maps_in` counts them."""
    return list(values.reshape((maps_in(where, values.shape, expected), *expected)))


def target_map(where: object, maps: MapFile, names: Sequence[str], target: int) -> np.ndarray:
    """The target's map among a file's (``names``: the images' file names, in order): the
    ``.npz`` member named after it, else the only map (or the target's of a batch N×H×W[×C]
    of as many maps as images), else the target's of as many maps as images. A single
    channel (H×W×1) is a sigmoid map H×W. Only the array it is in is read."""
    name = names[target]
    stems = {name, Path(name).stem}
    declared = maps.declared
    named = [index for index, item in enumerate(declared) if item.name and item.name in stems]
    if named:
        values = maps.read(named[0]).values
    elif len(declared) == 1:
        shape = declared[0].shape
        several = len(shape) == 3 and len(names) > 1 and shape[0] == len(names)
        if len(shape) == 4 or several:  # a batch, N first
            if shape[0] != len(names):
                raise InputError(where, f"holds a batch of {shape[0]} maps for {len(names)} images")
            values = maps.read(0).values[target]
        else:
            values = maps.read(0).values
    elif len(declared) == len(names):
        values = maps.read(target).values
    else:
        raise InputError(
            where, f"holds {len(declared)} maps for {len(names)} images; give the target's"
        )
    return values[..., 0] if values.ndim == 3 and values.shape[-1] == 1 else values
