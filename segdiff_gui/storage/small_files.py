"""Small files segdiff keeps beside its runs (a test set's record, a remembered probe or model
inspection), read as untrusted data: a plain file only (a link, FIFO or device is refused, and
one swapped in after the check is neither followed nor waited on), bounded in size before a
byte is read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from segdiff_gui.storage.hdf5_access import UnreadableEntry

__all__ = ["read_small_file"]


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of the plain file ``path``, at most ``limit`` of them; otherwise
    :class:`UnreadableEntry` naming it and why."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:  # a link (ELOOP) among them
        if os.path.islink(path):
            raise UnreadableEntry(str(path), "is a symbolic link, not a plain file") from None
        raise UnreadableEntry(str(path), f"cannot be read ({error.strerror})") from None
    try:
        info = os.fstat(descriptor)  # what was opened, not what the name said a moment ago
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableEntry(str(path), "is not a plain file")
        if info.st_size > limit:
            raise UnreadableEntry(str(path), f"is over {limit:,} bytes, more than segdiff writes")
        chunks, size = [], 0
        while chunk := os.read(descriptor, limit + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # grew since the fstat
                raise UnreadableEntry(
                    str(path), f"is over {limit:,} bytes, more than segdiff writes"
                )
        return b"".join(chunks)
    except OSError as error:
        raise UnreadableEntry(str(path), f"cannot be read ({error.strerror})") from None
    finally:
        os.close(descriptor)
