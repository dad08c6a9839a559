"""Probability maps from the user's own pipeline (``segdiff import``): ``.npy``, ``.npz`` (one
map per member) and float TIFF, read as untrusted data and checked against the map the model
gives, each refusal one line naming the file.

A map is float32 H×W (one sigmoid channel) or H×W×C (softmax), or a batch of them (N first).
A float64 map is rounded to float32 (said), a float16 one widened exactly; an integer,
boolean or object array is refused (an ``.npy`` of Python objects is never unpickled).
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import check_stored_bytes
from segdiff_gui.core.text import printable, shape_text

__all__ = ["MAP_SUFFIXES", "UserMap", "fit_to_map_shape", "read_maps", "target_map"]

MAP_SUFFIXES = (".npy", ".npz", ".tif", ".tiff")
_MAX_MEMBERS = 4096


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


def _npy_header(handle: object, where: str) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(handle)  # type: ignore[arg-type]
    read = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, _, dtype = read(handle)  # type: ignore[arg-type]
    return tuple(shape), dtype


def _checked_dtype(where: str, dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise InputError(where, "holds Python objects (object dtype); segdiff never unpickles")
    if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
        raise InputError(
            where, f"is {dtype}; a probability map is float32 (float64 is rounded to float32)"
        )


def _as_float32(where: str, array: np.ndarray, name: str = "") -> UserMap:
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


def _read_npy(path: Path) -> list[UserMap]:
    with path.open("rb") as handle:
        try:
            shape, dtype = _npy_header(handle, str(path))
        except ValueError as error:
            raise InputError(path, f"is not a .npy array: {error}") from None
    _checked_dtype(str(path), dtype)
    check_stored_bytes(path, shape, dtype.itemsize, "map")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as error:
        raise InputError(path, f"cannot be read as a .npy array: {error}") from None
    return [_as_float32(str(path), array)]


def _read_npz(path: Path) -> list[UserMap]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise InputError(path, f"is not a .npz archive: {error}") from None
    maps = []
    with archive:
        members = [info for info in archive.infolist() if not info.is_dir()]
        if not members:
            raise InputError(path, "holds no array")
        if len(members) > _MAX_MEMBERS:
            raise InputError(path, f"holds {len(members):,} members, over {_MAX_MEMBERS:,}")
        for info in members:
            name = printable(info.filename.removesuffix(".npy"))[:200]
            where = f"{path} [{name}]"
            with archive.open(info) as handle:
                try:
                    shape, dtype = _npy_header(handle, where)
                except ValueError as error:
                    raise InputError(where, f"is not a .npy array: {error}") from None
                _checked_dtype(where, dtype)
                check_stored_bytes(where, shape, dtype.itemsize, "map")
            with archive.open(info) as handle:
                try:
                    array = np.lib.format.read_array(handle, allow_pickle=False)
                except ValueError as error:
                    raise InputError(where, f"cannot be read: {error}") from None
            maps.append(_as_float32(where, array, name))
    return maps


def _read_tiff(path: Path) -> list[UserMap]:
    import tifffile  # here: most maps are .npy

    try:
        with tifffile.TiffFile(path) as tiff:
            if not tiff.series:
                raise InputError(path, "holds no image")
            series = tiff.series[0]
            _checked_dtype(str(path), np.dtype(series.dtype))
            check_stored_bytes(path, tuple(series.shape), np.dtype(series.dtype).itemsize, "map")
            array = np.asarray(series.asarray())
    except tifffile.TiffFileError as error:
        raise InputError(path, f"is not a readable TIFF: {error}") from None
    return [_as_float32(str(path), array)]


def read_maps(path: str | Path) -> list[UserMap]:
    """Every map of ``path`` (one, or an ``.npz``'s members in their order), checked: float,
    finite, within [0, 1]. Shapes are checked against the model by :func:`fit_to_map_shape`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such map file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _read_npy(path)
    if suffix == ".npz":
        return _read_npz(path)
    if suffix in (".tif", ".tiff"):
        return _read_tiff(path)
    raise InputError(path, f"is not a map file ({', '.join(MAP_SUFFIXES)} expected)")


def fit_to_map_shape(where: str, values: np.ndarray, expected: tuple[int, ...]) -> list[np.ndarray]:
    """``values`` as maps of shape ``expected`` (H×W or H×W×C): one map, or a batch of them
    (N first); a single channel may be kept (H×W×1) and a batch of one given as (1, …)."""
    shape = values.shape
    if shape == expected:
        return [values]
    if len(expected) == 2 and shape == (*expected, 1):
        return [values[..., 0]]
    if len(shape) == len(expected) + 1 and shape[1:] == expected:
        return list(values)
    if len(expected) == 2 and len(shape) == 4 and shape[1:] == (*expected, 1):
        return list(values[..., 0])
    wanted = shape_text(expected)
    raise InputError(
        where,
        f"has shape {shape_text(shape)}; the model's map is {wanted} (or N×{wanted} "
        "for a batch of N images)",
    )


def target_map(
    where: object, maps: Sequence[UserMap], names: Sequence[str], target: int
) -> np.ndarray:
    """The target's map among a file's (``names``: the images' file names, in order): the
    ``.npz`` member named after it, else the only map (or the target's of a batch N×H×W[×C]
    of as many maps as images), else the target's of as many maps as images. A single
    channel (H×W×1) is a sigmoid map H×W."""
    name = names[target]
    stems = {name, Path(name).stem}
    named = [item for item in maps if item.name and item.name in stems]
    if named:
        values = named[0].values
    elif len(maps) == 1:
        values = maps[0].values
        several = values.ndim == 3 and len(names) > 1 and len(values) == len(names)
        if values.ndim == 4 or several:  # a batch, N first
            if len(values) != len(names):
                raise InputError(
                    where, f"holds a batch of {len(values)} maps for {len(names)} images"
                )
            values = values[target]
    elif len(maps) == len(names):
        values = maps[target].values
    else:
        raise InputError(
            where, f"holds {len(maps)} maps for {len(names)} images; give the target's"
        )
    return values[..., 0] if values.ndim == 3 and values.shape[-1] == 1 else values
