"""Opening HDF5 files that may be hostile: a bundle is untrusted data, and a cache entry may be
damaged or tampered with.

HDF5 follows soft and external links, reads a dataset's bytes from other files (external raw
storage, virtual datasets) and opens whatever path it is given, a FIFO included, where it
blocks for ever. So before HDF5 sees a file we check that it is a plain, non-empty file with the
HDF5 signature, and every object segdiff reads is reached through a hard link and stored in the
file itself. Anything else is refused, before a byte of it is read, as :class:`UnreadableEntry`:
one line that names the file and what is wrong with it.

Damaged metadata makes h5py raise what a program's own mistakes raise (a corrupt object header
is a ``KeyError``, a damaged link or attribute table a ``RuntimeError``): each structural read
(a member, an object's attributes) goes through :func:`h5py_damage`, which says it as that line.

h5py serialises its calls into HDF5 (which is not thread-safe) with one lock, but its
``read_direct_chunk`` and ``write_direct_chunk`` do not take it: :func:`read_chunk` and
:func:`write_chunk` do, so a thread writing a map never meets another reading attributes
inside HDF5 ("Unspecified error in H5Dwrite_chunk").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from h5py._objects import phil  # h5py's own lock around HDF5

from segdiff_gui.core.errors import InputError, first_line

__all__ = [
    "UnreadableEntry",
    "detached",
    "h5py_damage",
    "has_member",
    "member_names",
    "open_h5_for_reading",
    "plain_dataset",
    "plain_group",
    "read_chunk",
    "write_attributes",
    "write_chunk",
]

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


class UnreadableEntry(InputError):
    """A file, or one run in it, that cannot be read safely; the rest of a cache still can."""


@contextmanager
def h5py_damage(stored: h5py.HLObject, where: str, what: str) -> Iterator[None]:
    """Around one structural read of ``stored`` by h5py: an error h5py raises on damaged
    metadata becomes the line that names the file (``where``) and the object (``what``).
    segdiff's own lines pass through as they are, and so does any error once ``stored``'s
    file is closed: reading a closed file is a mistake of segdiff's, not damage (a run taken
    for damaged would be computed again over a good one)."""
    try:
        yield
    except InputError:
        raise
    except (KeyError, RuntimeError, ValueError, OSError) as error:
        if not stored.id.valid:
            raise
        # A KeyError's text is its argument quoted: the argument is h5py's message.
        said = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise UnreadableEntry(where, f"{what} is damaged ({first_line(said)})") from None


def detached(error: UnreadableEntry) -> UnreadableEntry:
    """``error`` without its traceback and chained errors, to be kept in a list: their frames
    hold what was being read (a whole map), and a list of damaged runs must not hold maps."""
    error.__traceback__ = error.__context__ = error.__cause__ = None
    return error


def _check_plain_file(path: Path, follow_symlinks: bool) -> None:
    try:
        info = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        dangling = not follow_symlinks or os.path.islink(path)
        raise UnreadableEntry(
            path, "is a dangling symbolic link" if dangling else "no such file"
        ) from None
    except OSError as error:
        raise UnreadableEntry(path, f"cannot be read ({error.strerror or error})") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnreadableEntry(path, "is a symbolic link, not a file segdiff wrote")
    if stat.S_ISDIR(info.st_mode):
        raise UnreadableEntry(path, "is a folder, not an HDF5 file")
    if not stat.S_ISREG(info.st_mode):
        raise UnreadableEntry(path, "is not a regular file (a FIFO, socket or device)")
    if info.st_size == 0:
        raise UnreadableEntry(path, "is empty (0 bytes)")
    # O_NONBLOCK: were the file swapped for a FIFO since the stat, this read must not hang.
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        head = os.read(descriptor, len(HDF5_SIGNATURE))
    finally:
        os.close(descriptor)
    if head != HDF5_SIGNATURE:
        raise UnreadableEntry(path, "is not an HDF5 file (no HDF5 signature at its start)")


def open_h5_for_reading(path: str | Path, follow_symlinks: bool = True) -> h5py.File:
    """Open a finished file read-only, once it is known to be a plain HDF5 file.

    Cache entries are opened with ``follow_symlinks=False``: segdiff never writes a link there,
    so one is a tampering (a link to another run would alias it). Locking is pointless for
    files that never change and fails on some network mounts.
    """
    path = Path(path)
    _check_plain_file(path, follow_symlinks)
    try:
        return h5py.File(path, "r", locking=False)
    except OSError as error:
        raise UnreadableEntry(path, f"not a readable HDF5 file ({first_line(error)})") from None


def _hard_child(group: h5py.Group, name: str, where: str) -> h5py.HLObject:
    if not name or "/" in name:
        raise UnreadableEntry(where, f"{group.name} names a member {name[:40]!r}")
    with h5py_damage(group, where, f"the member table of {group.name}"):
        link = group.get(name, getlink=True)
    if link is None:
        raise UnreadableEntry(where, f"has no {_path(group, name)}")
    if isinstance(link, h5py.ExternalLink):
        raise UnreadableEntry(where, f"{_path(group, name)} is a link to another file")
    if not isinstance(link, h5py.HardLink):
        raise UnreadableEntry(where, f"{_path(group, name)} is a soft link, not stored data")
    with h5py_damage(group, where, _path(group, name)):
        return group[name]


def member_names(group: h5py.Group, where: str) -> list[str | bytes]:
    """The names of ``group``'s members, as h5py gives them (bytes where a name is not
    UTF-8)."""
    with h5py_damage(group, where, f"the member table of {group.name}"):
        return list(group.keys())


def has_member(group: h5py.Group, name: str, where: str) -> bool:
    with h5py_damage(group, where, f"the member table of {group.name}"):
        return name in group


def _path(group: h5py.Group, name: str) -> str:
    return f"{group.name.rstrip('/')}/{name}"


def plain_group(group: h5py.Group, name: str, where: str) -> h5py.Group:
    """The group ``name`` of ``group``, reached through a hard link."""
    found = _hard_child(group, name, where)
    if not isinstance(found, h5py.Group):
        raise UnreadableEntry(where, f"{_path(group, name)} is not a group")
    return found


def plain_dataset(group: h5py.Group, name: str, where: str) -> h5py.Dataset:
    """The dataset ``name`` of ``group``: a hard link to bytes stored in this very file."""
    found = _hard_child(group, name, where)
    if not isinstance(found, h5py.Dataset):
        raise UnreadableEntry(where, f"{_path(group, name)} is not a dataset")
    with h5py_damage(found, where, _path(group, name)):
        virtual, external = found.is_virtual, found.external
        found.shape, found.dtype  # noqa: B018 - what a reader asks first, read here once
    if virtual:
        raise UnreadableEntry(where, f"{_path(group, name)} is a virtual dataset (other files)")
    if external:
        raise UnreadableEntry(where, f"{_path(group, name)} keeps its bytes in external files")
    return found


def read_chunk(dataset: h5py.Dataset, offset: tuple[int, ...]) -> tuple[int, bytes]:
    """A chunk's stored bytes and filter mask, as ``read_direct_chunk``, under h5py's lock."""
    with phil:
        mask, stored = dataset.id.read_direct_chunk(offset)
    return int(mask), stored


def write_chunk(dataset: h5py.Dataset, offset: tuple[int, ...], payload: bytes) -> None:
    """Store a ready-made chunk, as ``write_direct_chunk``, under h5py's lock."""
    with phil:
        dataset.id.write_direct_chunk(offset, payload)


_ATTRIBUTE_TYPES: dict[np.dtype[Any], tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]] = {}
_TEXT = h5py.string_dtype()


def write_attributes(stored: h5py.HLObject, values: Mapping[str, str | int | float]) -> None:
    """Write each of ``values`` (text, whole numbers, numbers, truth values) as an attribute
    of ``stored``, which holds none of those names yet: the same bytes as h5py's
    ``attrs[name] = value``, through HDF5's own calls (h5py's creates each under a temporary
    name and renames it, for a replacement: three times the time, and a sweep writes
    thousands of runs of sixty attributes)."""
    with phil:
        scalar = h5py.h5s.create(h5py.h5s.SCALAR)  # one for every single value: most are
        for name, value in values.items():
            data = np.array(value, dtype=_TEXT) if isinstance(value, str) else np.asarray(value)
            if data.dtype.kind not in "biuf" and not isinstance(value, str):
                raise TypeError(f"attribute {name!r} is {data.dtype}, not text or a number")
            types = _ATTRIBUTE_TYPES.get(data.dtype)
            if types is None:
                logical = h5py.h5t.py_create(data.dtype, logical=True)
                types = _ATTRIBUTE_TYPES[data.dtype] = (logical, h5py.h5t.py_create(data.dtype))
            space = scalar if data.ndim == 0 else h5py.h5s.create_simple(data.shape)
            attribute = h5py.h5a.create(stored.id, name.encode("utf-8"), types[0], space)
            try:
                attribute.write(data, mtype=types[1])
            finally:
                attribute.close()
