"""Large arrays in ordinary pages, for maps that are written once, right after they are made.

numpy asks Linux for transparent huge pages for every array of 4 MiB and more. Where the kernel
then compacts memory on the first touch of each 2 MiB (its ``defrag`` default, ``madvise``), or
where a virtual machine backs fresh memory lazily, that first touch is slow: on the reference VM
64 MiB fresh from the system took 110 ms to fill with huge pages and 35–50 ms without (and 8 ms
with huge pages once the process reuses its own memory). A fresh process filling four 8192²
maps from threads spent 3 s of system time with huge pages against 1.3 s without.

So what a large group makes once (its maps as read, their flip masks and colour indices) comes
from an anonymous mapping of ordinary pages; scans of it afterwards are as fast either way
(measured). Smaller arrays keep numpy's allocator: a cutoff dragged over 2048² maps makes masks
of 4 MiB many times a second, and reused huge pages are the fastest there."""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

__all__ = ["ORDINARY_FROM_BYTES", "empty_in_ordinary_pages"]

# 8192² bytes (a mask or colour indices of a 8192² map): only arrays this large come from a
# mapping of their own (a mapping per small array would cost more than it saves).
ORDINARY_FROM_BYTES = 64 << 20


def empty_in_ordinary_pages(
    shape: tuple[int, ...], dtype: Any, from_bytes: int | None = None
) -> np.ndarray:
    """An array of ``shape`` (zeroed) in an anonymous mapping of ordinary pages where it is
    ``from_bytes`` (default :data:`ORDINARY_FROM_BYTES`) or more, else ``np.empty``. The
    mapping lives as long as the array (the array holds the buffer)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    if count * dtype.itemsize < (ORDINARY_FROM_BYTES if from_bytes is None else from_bytes):
        return np.empty(shape, dtype=dtype)
    buffer = mmap.mmap(-1, max(1, count * dtype.itemsize))
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)
