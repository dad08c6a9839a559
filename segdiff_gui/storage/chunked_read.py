"""Reading a large stored map on every core.

HDF5 inflates a dataset's chunks one after another on one core, under h5py's lock; an
8192×8192 map takes 0.5–1 s that way on the 2-core reference machine, and the GUI opens four.
The maps segdiff writes are float32 chunks through shuffle then deflate, in files that never
change once written (DESIGN: the cache's promises). So for a large map we ask HDF5 only where
each chunk lies (one call), map the file, and inflate and unshuffle the chunks in a thread
pool straight from the mapped bytes: inflating (ISA-L, else zlib) and numpy's copies release
the GIL, and nothing in the workers calls HDF5, which is not safe to call from several threads.

Any other layout, any chunk HDF5 stored with a filter skipped, and chunks never written are
read by HDF5 itself, so the result is always what ``dataset[()]`` gives.
"""

from __future__ import annotations

import mmap
import os
from typing import NamedTuple

import h5py
import numpy as np

from segdiff_gui.core.parallel import thread_map

try:  # ISA-L inflates about 1.5× faster than zlib on the reference machine; same bytes out
    from isal.isal_zlib import decompress as inflate
except ImportError:  # no wheel for this machine
    from zlib import decompress as inflate

__all__ = ["read_map"]

# Below this the thread pool costs more than it saves (a demo map is 256 KiB).
PARALLEL_FROM_BYTES = 16 * 2**20
_PIPELINE = (h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE)
_FLOAT32 = np.dtype("<f4")
_WORD = np.dtype("<u4")


class _Chunk(NamedTuple):
    region: tuple[slice, ...]  # where it goes in the map
    address: int  # where its compressed bytes start in the file
    size: int


def read_map(dataset: h5py.Dataset) -> np.ndarray:
    """The whole of ``dataset`` as a numpy array, inflated in parallel where that helps."""
    if dataset.nbytes < PARALLEL_FROM_BYTES or not _is_plain_file_shuffle_deflate(dataset):
        return np.asarray(dataset[()])
    out = np.empty(dataset.shape, dtype=_FLOAT32)
    chunks, by_hdf5 = _locate_chunks(dataset)
    expected = np.prod([-(-n // c) for n, c in zip(dataset.shape, dataset.chunks, strict=True)])
    if len(chunks) + len(by_hdf5) < expected:  # some were never written: the fill value
        out[...] = dataset.fillvalue
    for region in by_hdf5:
        out[region] = dataset[region]
    if chunks:
        _inflate_in_parallel(dataset, chunks, out)
    return out


def _inflate_in_parallel(dataset: h5py.Dataset, chunks: list[_Chunk], out: np.ndarray) -> None:
    workers = os.cpu_count() or 1
    # A few tasks per worker, enough to balance; each a contiguous run of chunks (chunk_iter
    # goes in address order, row by row), so a task fills neighbouring memory.
    per_task = -(-len(chunks) // (workers * 4))
    tasks = [chunks[i : i + per_task] for i in range(0, len(chunks), per_task)]
    # Map the very file HDF5 has open (its descriptor), not the one at its name now: a run's
    # file may have been replaced since (writes are atomic renames), or the name be relative.
    with mmap.mmap(dataset.file.id.get_vfd_handle(), 0, access=mmap.ACCESS_READ) as mapped:
        stored = memoryview(mapped)
        try:
            thread_map(lambda task: _inflate(stored, task, dataset.chunks, out), tasks)
        finally:
            stored.release()  # the map cannot close while a view of it is alive


def _is_plain_file_shuffle_deflate(dataset: h5py.Dataset) -> bool:
    """Float32 chunks through shuffle then deflate, at plain addresses of a file on disk."""
    file = dataset.file
    if dataset.chunks is None or dataset.dtype != _FLOAT32:
        return False
    if not hasattr(dataset.id, "chunk_iter"):  # h5py built on HDF5 older than 1.14
        return False
    # Only the plain one-file drivers hand out a descriptor whose offsets are file addresses
    # (h5py names sec2 "windows" on Windows); a user block would shift every address.
    if file.driver not in ("sec2", "windows") or file.userblock_size != 0:
        return False
    plist = dataset.id.get_create_plist()
    filters = tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))
    return filters == _PIPELINE


def _locate_chunks(dataset: h5py.Dataset) -> tuple[list[_Chunk], list[tuple[slice, ...]]]:
    """Every written chunk: those to inflate here, and those HDF5 must read (filter skipped)."""
    chunks: list[_Chunk] = []
    by_hdf5: list[tuple[slice, ...]] = []
    shape, size = dataset.shape, dataset.chunks

    def visit(info: h5py.h5d.StoreInfo) -> None:
        region = tuple(
            slice(start, min(start + step, total))
            for start, step, total in zip(info.chunk_offset, size, shape, strict=True)
        )
        if info.filter_mask == 0:
            chunks.append(_Chunk(region, info.byte_offset, info.size))
        else:
            by_hdf5.append(region)

    dataset.id.chunk_iter(visit)
    return chunks, by_hdf5


def _inflate(
    stored: memoryview, chunks: list[_Chunk], chunk_shape: tuple[int, ...], out: np.ndarray
) -> None:
    words = out.view(_WORD)  # the float32 values' bit patterns, little-endian like the file
    scratch = np.empty(chunk_shape, dtype=_WORD)  # contiguous: no buffered, strided ufuncs
    for chunk in chunks:
        try:
            raw = inflate(stored[chunk.address : chunk.address + chunk.size])
            planes = np.frombuffer(raw, dtype=np.uint8).reshape(_FLOAT32.itemsize, *chunk_shape)
        except Exception as error:  # noqa: BLE001 - zlib, ISA-L and numpy each have their own
            # A damaged file is an OSError, as HDF5's own reading reports it.
            raise OSError(f"a stored chunk at byte {chunk.address} is damaged ({error})") from None
        _unshuffle(planes, scratch)
        # Edge chunks are stored whole; only their part inside the map is kept.
        inside = tuple(slice(0, part.stop - part.start) for part in chunk.region)
        words[chunk.region] = scratch[inside]


def _unshuffle(planes: np.ndarray, words: np.ndarray) -> None:
    """Undo HDF5's shuffle filter into ``words``: it stores byte 0 (the lowest) of every value,
    then byte 1, and so on. Shifting and or-ing whole byte planes into the words runs at memory
    speed (SIMD); a transposing copy moves one byte at a time and took 3× as long."""
    np.copyto(words, planes[-1])
    for byte in range(len(planes) - 2, -1, -1):
        np.left_shift(words, 8, out=words)
        np.bitwise_or(words, planes[byte], out=words)
