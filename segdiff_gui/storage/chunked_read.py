"""Reading a stored array (a run's map, a target image) without trusting the file.

segdiff writes every array as chunks through shuffle then deflate, in files that never change
once written (DESIGN: the cache's promises). We read exactly that layout and nothing else, and
we do the inflating ourselves instead of letting HDF5 run its filters:

- HDF5's deflate filter inflates a chunk into whatever size the stream asks for: a few MB of
  crafted chunks declare a small map and inflate to gigabytes. Here each chunk is inflated to
  at most its own size, and a chunk that holds more, or less, is damage.
- A map must have every chunk stored: a missing one would silently read as the fill value.
- HDF5 inflates chunks one after another on one core, under h5py's lock; an 8192×8192 map takes
  0.5–1 s that way on the 2-core reference machine, and the GUI opens four. For a large array we
  ask HDF5 only where each chunk lies (one call), map the file, and inflate and unshuffle the
  chunks in a thread pool straight from the mapped bytes: inflating (ISA-L, else zlib) and
  numpy's copies release the GIL, and nothing in the workers calls HDF5, which is not safe to
  call from several threads. A small array's few chunks are read raw through HDF5
  (``read_direct_chunk``: no filter runs) and inflated here.

Chunks HDF5 stored with the (optional) deflate skipped hold raw shuffled bytes: they are
unshuffled here like the others.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import h5py
import numpy as np

from segdiff_gui.core.pages import empty_in_ordinary_pages
from segdiff_gui.core.parallel import thread_map
from segdiff_gui.storage.hdf5_access import UnreadableEntry, h5py_damage, read_chunk

try:  # ISA-L inflates about 1.5× faster than zlib on the reference machine; same bytes out
    from isal.isal_zlib import decompressobj
except ImportError:  # no wheel for this machine
    from zlib import decompressobj  # type: ignore[assignment]

__all__ = ["read_stored_array"]

# Below this the thread pool and the file mapping cost more than they save (a demo map is
# 256 KiB, one chunk).
PARALLEL_FROM_BYTES = 16 * 2**20
_SHUFFLE, _DEFLATE = h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE
# Bit i of a chunk's filter mask set: filter i of the pipeline was skipped for that chunk.
_DEFLATE_SKIPPED = 0b10
# segdiff writes chunks of at most 256×256 (×classes); a 16384² map has 4,096 of them. A crafted
# file declaring millions of one-pixel chunks would make listing them a CPU bomb.
MAX_CHUNKS = 1 << 16
MAX_CHUNK_BYTES = 64 * 2**20
_WORDS: dict[int, np.dtype[Any]] = {
    1: np.dtype("u1"),
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
    8: np.dtype("<u8"),
}


class _Chunk(NamedTuple):
    region: tuple[slice, ...]  # where it goes in the array
    offset: tuple[int, ...]  # its logical offset, as HDF5 names it
    address: int  # where its stored bytes start in the file
    size: int  # how many bytes are stored
    deflated: bool  # False: HDF5 skipped the (optional) deflate, the bytes are only shuffled


def read_stored_array(dataset: h5py.Dataset, where: str) -> np.ndarray:
    """The whole of ``dataset`` (chunked, shuffle then deflate, every chunk stored), refusing
    anything else as :class:`UnreadableEntry` naming ``where`` and the dataset."""
    with h5py_damage(dataset, where, dataset.name):
        return _read_stored_array(dataset, where)


def _read_stored_array(dataset: h5py.Dataset, where: str) -> np.ndarray:
    name = dataset.name
    _check_layout(dataset, where)
    chunks = _locate_chunks(dataset, where)
    if dataset.size * dataset.dtype.itemsize >= PARALLEL_FROM_BYTES and _file_is_plain(dataset):
        # Written once, right away: ordinary pages (core/pages.py).
        out = empty_in_ordinary_pages(dataset.shape, dataset.dtype, from_bytes=0)
        _inflate_mapped(dataset, chunks, out, where)
    else:
        out = np.empty(dataset.shape, dtype=dataset.dtype)
        # Raw stored bytes through HDF5 (no filter runs), inflated here with the same bound.
        for chunk in chunks:
            _mask, stored = read_chunk(dataset, chunk.offset)
            _place(memoryview(stored), chunk, dataset.chunks, out, where, name)
    return out


def _check_layout(dataset: h5py.Dataset, where: str) -> None:
    name = dataset.name
    dtype = dataset.dtype
    if dtype.itemsize not in _WORDS or dtype.kind not in "uif" or dtype.byteorder == ">":
        raise UnreadableEntry(where, f"{name} holds {dtype.str} values, which segdiff never writes")
    if dataset.chunks is None:
        raise UnreadableEntry(where, f"{name} is not stored in chunks, as segdiff writes arrays")
    plist = dataset.id.get_create_plist()
    filters = tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))
    if filters != (_SHUFFLE, _DEFLATE):
        raise UnreadableEntry(
            where, f"{name} is not stored through shuffle and deflate, as segdiff writes arrays"
        )
    chunk_bytes = int(np.prod(dataset.chunks)) * dataset.dtype.itemsize
    count = int(np.prod([-(-n // c) for n, c in zip(dataset.shape, dataset.chunks, strict=True)]))
    if chunk_bytes > MAX_CHUNK_BYTES or count > MAX_CHUNKS:
        raise UnreadableEntry(
            where, f"{name} declares {count:,} chunks of {chunk_bytes:,} bytes (too many, or "
            "too large, for a map segdiff wrote)",
        )  # fmt: skip


def _locate_chunks(dataset: h5py.Dataset, where: str) -> list[_Chunk]:
    """Every chunk, in address order; all must be stored, each inside the file, each once at
    its own place on the chunk grid (a crafted index naming one place twice would leave part of
    the array as whatever memory held before)."""
    chunks: list[_Chunk] = []
    seen: set[tuple[int, ...]] = set()
    shape, size = dataset.shape, dataset.chunks
    file_size = os.path.getsize(dataset.file.filename)

    def visit(info: h5py.h5d.StoreInfo) -> None:
        offset = tuple(int(n) for n in info.chunk_offset)
        on_grid = len(offset) == len(shape) and all(
            0 <= start < total and start % step == 0
            for start, step, total in zip(offset, size, shape, strict=True)
        )
        if not on_grid or offset in seen:
            raise UnreadableEntry(where, f"{dataset.name}'s chunk index is damaged")
        seen.add(offset)
        region = tuple(
            slice(start, min(start + step, total))
            for start, step, total in zip(info.chunk_offset, size, shape, strict=True)
        )
        if info.filter_mask & ~_DEFLATE_SKIPPED or info.size > MAX_CHUNK_BYTES + 4096:
            raise UnreadableEntry(where, f"{dataset.name} has a chunk segdiff did not write")
        if info.byte_offset is None or info.byte_offset + info.size > file_size:
            raise UnreadableEntry(where, f"{dataset.name} has a chunk past the end of the file")
        deflated = not info.filter_mask & _DEFLATE_SKIPPED
        chunks.append(_Chunk(region, offset, info.byte_offset, info.size, deflated))

    try:
        if hasattr(dataset.id, "chunk_iter"):
            dataset.id.chunk_iter(visit)
        else:  # h5py built on HDF5 older than 1.14: one call per chunk
            for index in range(dataset.id.get_num_chunks()):
                visit(dataset.id.get_chunk_info(index))
    except UnreadableEntry:
        raise
    except Exception as error:  # noqa: BLE001 - HDF5's chunk index itself is damaged
        raise UnreadableEntry(where, f"{dataset.name}'s chunk index is damaged ({error})") from None
    expected = int(np.prod([-(-n // c) for n, c in zip(shape, size, strict=True)]))
    if len(chunks) != expected:
        raise UnreadableEntry(
            where, f"{dataset.name} has {len(chunks):,} of its {expected:,} chunks stored"
        )
    return chunks


def _file_is_plain(dataset: h5py.Dataset) -> bool:
    """Only the plain one-file drivers hand out a descriptor whose offsets are file addresses
    (h5py names sec2 "windows" on Windows); a user block would shift every address."""
    file = dataset.file
    return file.driver in ("sec2", "windows") and file.userblock_size == 0


def _inflate_mapped(
    dataset: h5py.Dataset, chunks: list[_Chunk], out: np.ndarray, where: str
) -> None:
    workers = os.cpu_count() or 1
    # A few tasks per worker, enough to balance; each a contiguous run of chunks (chunk_iter
    # goes in address order, row by row), so a task fills neighbouring memory.
    per_task = -(-len(chunks) // (workers * 4))
    tasks = [chunks[i : i + per_task] for i in range(0, len(chunks), per_task)]
    name = dataset.name
    # Map the very file HDF5 has open (its descriptor), not the one at its name now: a run's
    # file may have been replaced since (writes are atomic renames), or the name be relative.
    with mmap.mmap(dataset.file.id.get_vfd_handle(), 0, access=mmap.ACCESS_READ) as mapped:
        stored = memoryview(mapped)
        place: Callable[[list[_Chunk]], None] = lambda task: _place_all(  # noqa: E731
            stored, task, dataset.chunks, out, where, name
        )
        try:
            thread_map(place, tasks)
        finally:
            stored.release()  # the map cannot close while a view of it is alive


def _place_all(
    stored: memoryview,
    chunks: list[_Chunk],
    chunk_shape: tuple[int, ...],
    out: np.ndarray,
    where: str,
    name: str,
) -> None:
    for chunk in chunks:
        view = stored[chunk.address : chunk.address + chunk.size]
        try:
            _place(view, chunk, chunk_shape, out, where, name)
        finally:
            view.release()  # an error's traceback must not keep the file's mapping open


def _place(
    stored: memoryview,
    chunk: _Chunk,
    chunk_shape: tuple[int, ...],
    out: np.ndarray,
    where: str,
    name: str,
) -> None:
    """Inflate (at most to the chunk's own size), unshuffle and copy one chunk into ``out``."""
    itemsize = out.dtype.itemsize
    expected = int(np.prod(chunk_shape)) * itemsize
    raw = _inflate_bounded(stored, expected) if chunk.deflated else bytes(stored)
    if raw is None or len(raw) != expected:
        raise UnreadableEntry(
            where, f"{name} has a damaged chunk at byte {chunk.address} (it does not inflate "
            "to its size)",
        )  # fmt: skip
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(itemsize, *chunk_shape)
    words = np.empty(chunk_shape, dtype=_WORDS[itemsize])  # contiguous: no strided ufuncs
    _unshuffle(planes, words)
    # Edge chunks are stored whole; only their part inside the array is kept.
    inside = tuple(slice(0, part.stop - part.start) for part in chunk.region)
    out.view(_WORDS[itemsize])[chunk.region] = words[inside]


def _inflate_bounded(stored: memoryview, expected: int) -> bytes | None:
    """The chunk's bytes, or ``None`` if the stream is damaged or holds more than ``expected``."""
    try:
        inflater = decompressobj()
        raw = inflater.decompress(stored, expected)
        if not inflater.eof or inflater.unconsumed_tail:
            return None
        return bytes(raw)
    except Exception:  # noqa: BLE001 - zlib and ISA-L each have their own error
        return None


def _unshuffle(planes: np.ndarray, words: np.ndarray) -> None:
    """Undo HDF5's shuffle filter into ``words``: it stores byte 0 (the lowest) of every value,
    then byte 1, and so on. Shifting and or-ing whole byte planes into the words runs at memory
    speed (SIMD); a transposing copy moves one byte at a time and took 3× as long."""
    np.copyto(words, planes[-1])
    for byte in range(len(planes) - 2, -1, -1):
        np.left_shift(words, 8, out=words)
        np.bitwise_or(words, planes[byte], out=words)
