"""The file that marks a folder as a segdiff cache, read and written without trusting the folder.

It is written aside and renamed into place, so that it is either whole or absent: a disk that
fills while a cache is made leaves no marker at all, never an empty one. A marker holding only
the start of segdiff's own (an empty file, as versions that wrote it in place left on a full
disk) is a creation that did not finish: the next claim finishes it. Anything else where the
marker belongs (a link, a FIFO, other content) is not segdiff's, and is never written through,
waited on or replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from enum import Enum
from pathlib import Path

from segdiff_gui.storage.hdf5_access import UnreadableEntry
from segdiff_gui.storage.small_files import read_small_file

__all__ = ["MARKER", "MarkerState", "is_marker_temporary", "marker_state", "write_marker"]

MARKER = ".segdiff-cache"
_CONTENT = (json.dumps({"format": "segdiff-cache", "version": 1}) + "\n").encode()
_MAX_BYTES = 4096
# write_marker's temporaries, exactly: ".segdiff-cache.<pid>.<8 hex>.tmp".
_TEMPORARY = re.compile(r"^\.segdiff-cache\.\d+\.[0-9a-f]{8}\.tmp$")
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


class MarkerState(Enum):
    ABSENT = "absent"
    WHOLE = "whole"
    UNFINISHED = "unfinished"  # empty, or the start of segdiff's own content
    FOREIGN = "foreign"  # a link, a FIFO, a folder, other content: not segdiff's


def marker_state(folder: Path) -> MarkerState:
    """What stands where ``folder``'s marker belongs."""
    marker = folder / MARKER
    if not os.path.lexists(marker):
        return MarkerState.ABSENT
    try:  # a plain small file only (never followed, never waited on)
        content = read_small_file(marker, _MAX_BYTES)
    except UnreadableEntry:
        return MarkerState.FOREIGN
    if _CONTENT.startswith(content) and content != _CONTENT:
        return MarkerState.UNFINISHED
    try:
        whole = json.loads(content)["format"] == "segdiff-cache"
    except (ValueError, KeyError, TypeError):
        whole = False
    return MarkerState.WHOLE if whole else MarkerState.FOREIGN


def is_marker_temporary(name: str) -> bool:
    """Whether ``name`` is one of :func:`write_marker`'s temporaries (a killed claim's)."""
    return bool(_TEMPORARY.match(name))


def write_marker(folder: Path) -> None:
    """Put a whole marker in ``folder`` (replacing an unfinished one): written to a new file
    beside it, flushed, then renamed into place. An OSError leaves no file behind."""
    temporary = folder / f"{MARKER}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    # O_EXCL and O_NOFOLLOW: a new file, never written through a link.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW
    descriptor = os.open(temporary, flags, 0o644)
    try:
        try:
            left = _CONTENT
            while left:
                left = left[os.write(descriptor, left) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, folder / MARKER)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
