"""A user's file opened as untrusted data, by every reader of io (images, masks, maps): a plain
file only, a TIFF read from its own bytes only, and a decoder's failure on a damaged file one
line naming it (:func:`decoding`).

A FIFO, socket or device is refused in one line, seen for what it is once opened (opened
without waiting for a writer, so one swapped in after a check is no wait either). tifffile
follows what a TIFF's metadata names (an OME-TIFF's other files by any path, a Micro-Manager
stack's siblings, an NDTiff index beside it) only from a file it could memory-map, one with a
file number: it is handed the file without one, and an OME-TIFF that names another file is
refused in one line, never read as zeros where the other file's planes would be.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.text import printable

if TYPE_CHECKING:
    import tifffile

__all__ = ["decoding", "npy_header", "open_plain", "open_tiff"]


def _opener(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _open_raw(path: Path, what: str) -> io.FileIO:
    try:
        raw = io.FileIO(path, "rb", opener=_opener)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise InputError(path, f"no such {what} file") from None
    except OSError as error:
        raise InputError(path, f"cannot be read ({error.strerror or error})") from None
    mode = os.fstat(raw.fileno()).st_mode  # what was opened, not what the name said before
    if stat.S_ISREG(mode):
        return raw
    raw.close()
    if stat.S_ISDIR(mode):
        raise InputError(path, f"no such {what} file")
    raise InputError(path, "is not a plain file (a FIFO, socket or device)")


def open_plain(path: Path, what: str) -> io.BufferedReader:
    """``path`` opened for reading if it is a plain file, else one line naming it (``what``:
    the kind of file, in ``no such image file``)."""
    return io.BufferedReader(_open_raw(path, what))


# numpy parses a header of at most this many bytes (its ``max_header_size``), but only once it
# has read it: a version 2 or 3 header may declare 4 GiB of itself, read whole before that.
_MAX_NPY_HEADER_BYTES = 10_000


def npy_header(handle: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """What a ``.npy`` file's header declares (shape, Fortran order, dtype), read without its
    values and without unpickling: a ``ValueError`` saying why where it is not one. The
    header's length is bounded before it is read, and a header that is not a literal (code,
    which numpy's ``ast.literal_eval`` refuses in its parser's words) is said to be one."""
    version = np.lib.format.read_magic(handle)
    width = 2 if version == (1, 0) else 4
    length = handle.read(width)
    if len(length) < width:
        raise ValueError("its header is cut short")
    declared = int.from_bytes(length, "little")
    if declared > _MAX_NPY_HEADER_BYTES:
        raise ValueError(
            f"its header declares {declared:,} bytes, over numpy's bound of "
            f"{_MAX_NPY_HEADER_BYTES:,}"
        )
    header = handle.read(declared)
    read = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    try:
        shape, fortran_order, dtype = read(io.BytesIO(length + header))
    except (ValueError, SyntaxError, RecursionError) as error:
        raise ValueError(_header_problem(header, error)) from None
    return tuple(int(n) for n in shape), bool(fortran_order), dtype


def _header_problem(header: bytes, error: BaseException) -> str:
    """Why numpy refused a header: not a literal, or numpy's own reason in a short line."""
    import ast

    try:
        ast.literal_eval(header.decode("latin1"))
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return "its header is not a literal description of an array; segdiff never runs code"
    return first_line(error, limit=200)


class _OwnBytesOnly(io.BufferedReader):
    """A plain file as tifffile may read it: without a file number, which tifffile asks before
    it opens any file a TIFF names (``FileHandle.is_file``)."""

    def fileno(self) -> int:
        raise io.UnsupportedOperation("segdiff reads a TIFF from its own bytes only")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _other_file_named(omexml: str, own_name: str) -> str | None:
    """The file an OME-TIFF's metadata names for its planes, other than itself, or ``None``:
    the rule by which tifffile tells the file's own planes (its root UUID, or a UUID given
    with its own file name where the root has none) from another file's."""
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(omexml)
    except ElementTree.ParseError:
        return None  # tifffile then reads the file's own pages, as a plain TIFF
    own = root.attrib.get("UUID")
    for element in root.iter():
        if _local(element.tag) == "BinaryOnly":
            return element.attrib.get("MetadataFile") or "a companion metadata file"
        if _local(element.tag) != "UUID":
            continue
        named = element.attrib.get("FileName", "")
        if own is None and element.text is not None and named.lower() == own_name.lower():
            own = element.text
        elif element.text != own:
            return named or element.text or "another file"
    return None


@contextmanager
def open_tiff(path: Path, what: str) -> Iterator[tifffile.TiffFile]:
    """``path`` as a TIFF read from its own bytes only (a plain file, see :func:`open_plain`);
    an OME-TIFF whose metadata names another file is refused in one line. tifffile's
    ``TiffFileError`` (not a TIFF) is the caller's to say."""
    import tifffile  # here: most files are not TIFFs, and tifffile is slow to import

    with _OwnBytesOnly(_open_raw(path, what)) as handle, tifffile.TiffFile(handle) as tiff:
        omexml = tiff.ome_metadata
        if omexml is not None and (other := _other_file_named(omexml, path.name)):
            raise InputError(
                path,
                f"is an OME-TIFF whose metadata names another file ({printable(other)[:200]}); "
                "segdiff reads a file's own bytes only: save it as one TIFF",
            )
        yield tiff


@contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """tifffile logs what it skips (a bad tag) through ``logging``, which prints to stderr."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextmanager
def decoding(path: object, what: str) -> Iterator[None]:
    """Within the block, a decoder's failure on a damaged file (a bad checksum, an encrypted
    or unsupported member, a codec unknown or not installed, a truncated stream) is one line
    naming ``path``: ``cannot be read as WHAT: why``. Each decoder fails in its own way, so any
    exception is; segdiff's own lines pass as they are. A decoder's warnings and log lines (a
    truncated file, an odd tag) would be raw lines on stderr: they are dropped."""
    try:
        with warnings.catch_warnings(), _quiet_logger("tifffile"):
            warnings.simplefilter("ignore")
            yield
    except InputError:
        raise
    except Exception as error:  # noqa: BLE001 - each decoder fails in its own way on a bad file
        raise InputError(path, f"cannot be read as {what}: {first_line(error)}") from None
