"""What every hostile case is held to, in this process: the one line that refuses it, and what
reading it may cost. The corpus's bombs asked
for 1.8–9.3 GB before they were refused, so each case is read with this process's
address space bounded to what it holds now plus :data:`HEADROOM`. An allocation past it fails
at once (numpy's MemoryError, HDF5's failure to allocate), which no case expects, instead of
swapping the machine. The bound is lifted again after the case: a process may raise its soft
limit back up to its hard one."""

from __future__ import annotations

import os
import re
import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from segdiff_gui.core.errors import InputError

# Reading a case's 32×32 maps (or the 8192² run of the linked-names case, 256 MB) takes far
# less; threads' stacks and malloc arenas take some of it.
HEADROOM = 1 << 30


def _address_space_in_use() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise LookupError("no VmSize in /proc/self/status")


@contextmanager
def bounded_memory(headroom: int = HEADROOM) -> Iterator[None]:
    """Within the block, this process cannot map more than ``headroom`` bytes beyond what it
    has mapped now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space_in_use() + headroom
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def files_under(folder: Path) -> dict[str, bytes]:
    """Every plain file under ``folder`` and its bytes (links, FIFOs left out: reading a
    FIFO would wait for a writer)."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink() and not path.is_fifo()
    }


def assert_one_line(error: BaseException, path: Path, problem: str) -> None:
    """``error`` is the one line a front end shows for it: it names ``path`` and says
    ``problem`` (a regex); anything but an :class:`InputError` would be a crash there."""
    assert isinstance(error, InputError), repr(error)
    text = str(error)
    assert "\n" not in text, text
    assert text.startswith(f"{path}: "), text
    assert re.search(problem, text), text


_RECORDINGS: list[list[str]] = []  # the blocks of opened_files() in progress


def _record_opens(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _RECORDINGS and isinstance(args[0], str | bytes | os.PathLike):
        for opened in _RECORDINGS:
            opened.append(os.fsdecode(args[0]))


_HOOKED: list[bool] = []


@contextmanager
def opened_files() -> Iterator[list[str]]:
    """Every path this process opens within the block, by Python's ``open``, ``io.open`` or
    ``os.open`` (an audit hook, added once, records them; a hook cannot be removed, so it
    records only while a block runs): what a reader opens beside the file it was given."""
    if not _HOOKED:
        sys.addaudithook(_record_opens)
        _HOOKED.append(True)
    opened: list[str] = []
    _RECORDINGS.append(opened)
    try:
        yield opened
    finally:
        _RECORDINGS[:] = [recording for recording in _RECORDINGS if recording is not opened]
