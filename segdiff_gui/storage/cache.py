"""The result cache: one small HDF5 file per finished run, written aside and renamed into place.

Why one file per run: a process killed at any moment can leave at most its own temporary file
truncated, never a finished run; two processes writing the same cache never share an open HDF5
file; readers only ever open complete, immutable files.

A cache folder is marked as one (:data:`MARKER`), because segdiff cleans up after killed
writers: it must never take a folder of the user's files for its own, and it removes only
temporaries by their exact name, in its own subfolders. Every entry is read as untrusted data:
a damaged or tampered one is reported with its path and reason, and costs only itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.limits import check_stored_bytes
from segdiff_gui.storage.chunked_read import read_stored_array
from segdiff_gui.storage.chunked_write import write_compressed
from segdiff_gui.storage.hdf5_access import (
    UnreadableEntry,
    detached,
    open_h5_for_reading,
    plain_dataset,
)
from segdiff_gui.storage.locations import (
    compilation_cache_dir,
    compilation_entry,
    default_cache_dir,
)
from segdiff_gui.storage.marker import (
    MARKER,
    MarkerState,
    is_marker_temporary,
    marker_state,
    write_marker,
)
from segdiff_gui.storage.records import (
    RunRecord,
    StoredAttributes,
    metadata_of_written,
    read_metadata,
    with_checked_map,
    write_record,
)
from segdiff_gui.storage.schema import is_digest

__all__ = [
    "MARKER",
    "CacheScan",
    "SETS_FOLDER",
    "ResultCache",
    "UnreadableEntry",
    "WrittenRun",
    "atomic_h5",
    "checked_digest",
    "compilation_cache_dir",
    "default_cache_dir",
    "open_h5_for_reading",
    "read_stored_image",
    "write_file_aside",
]

# The merged test sets' manifests (storage/set_manifests.py).
SETS_FOLDER = "test-sets"
_TMP_SUFFIX = ".tmp"
# Keys and content hashes are SHA-256 hex digests; anything else (e.g. "../x" from a crafted
# bundle) must never become part of a path.
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_RUN_FILE = re.compile(r"^[0-9a-f]{64}\.h5$")
# atomic_h5's temporaries, exactly: ".<final name>.<pid>.<8 hex>.tmp".
_TEMPORARY = re.compile(r"^\.[0-9a-f]{64}\.h5\.\d+\.[0-9a-f]{8}\.tmp$")
_SPARE_BYTES = 256 << 10
_REMEMBERED = 1 << 14
# Maps that a check read whole, kept (up to this many bytes) for the read that usually follows
# it: planning checks every cached map, then the window or `segdiff run`'s report reads them.
_HANDED_ON_BYTES = 64 << 20


def checked_digest(value: str, what: str = "key") -> str:
    if not _DIGEST.match(value):
        raise InputError(value[:80], f"is not a valid run {what} (64 hex digits expected)")
    return value


def no_space(folder: Path, error: OSError | None = None, needed: int = 0) -> InputError:
    free = shutil.disk_usage(folder).free if folder.is_dir() else 0
    wanted = f"{needed / 2**20:,.1f} MB needed, " if needed else ""
    reason = "no space left" if error is None or error.errno == errno.ENOSPC else "cannot write"
    detail = f": {error.strerror}" if error is not None and error.errno != errno.ENOSPC else ""
    return InputError(folder, f"{reason} on its disk{detail} ({wanted}{free / 2**20:,.1f} MB free)")


def _temporary_for(final: Path) -> Path:
    """Where a file is written before it is renamed to ``final``: segdiff's own naming,
    ``.<name>.<pid>.<8 hex>.tmp`` beside it."""
    return final.with_name(f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_TMP_SUFFIX}")


def remove_killed_temporaries(final: Path, every_name: bool = False) -> int:
    """Remove what writers of ``final`` killed before their rename left beside it (a bundle
    cut short by kill -9: as large as the bundle), and return how many: plain files of
    segdiff's own temporary naming for that very path (with ``every_name``, for any entry
    of its folder: a cache's) whose writer, by the process id in the name, no longer runs
    here. Never a live writer's, or a file of any other name."""
    name = r"[0-9a-f]{64}\.h5" if every_name else re.escape(final.name)
    own = re.compile(rf"^\.{name}\.(\d+)\.[0-9a-f]{{8}}{re.escape(_TMP_SUFFIX)}$")
    try:
        entries = list(os.scandir(final.parent))
    except OSError:
        return 0
    import psutil  # here: only a write asks

    removed = 0
    for entry in entries:
        if not (found := own.match(entry.name)) or psutil.pid_exists(int(found.group(1))):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed += 1
    return removed


# The folders this process has cleared of killed writers' temporaries (write_file_aside):
# once each, so that a set of thousands of entries is not listed once per entry.
_CLEARED: set[Path] = set()


def write_file_aside(final: Path, data: bytes) -> None:
    """Write ``data`` next to ``final`` and rename it into place whole. What killed writers
    left in its folder (a merge or a run cut short) is removed by the first write there of
    each process. The file is not synced to the disk one by one (the cost of a sweep's
    thousands of entries): a kill -9 loses nothing written, and what a power cut tears is
    found damaged by its checksum when read, and computed again."""
    folder = final.parent
    if folder not in _CLEARED:  # once per folder and process: a sweep writes thousands
        folder.mkdir(parents=True, exist_ok=True)
        remove_killed_temporaries(final, every_name=True)
        _CLEARED.add(folder)
    temporary = _temporary_for(final)
    try:
        try:
            _write_then_rename(temporary, final, data)
        except FileNotFoundError:  # the folder was removed since (a cache cleared): again
            folder.mkdir(parents=True, exist_ok=True)
            try:
                _write_then_rename(temporary, final, data)
            except FileNotFoundError as error:
                raise no_space(folder, error, len(data)) from None
    finally:
        temporary.unlink(missing_ok=True)


def _write_then_rename(temporary: Path, final: Path, data: bytes) -> None:
    """Write ``data`` to ``temporary`` and rename it to ``final``; FileNotFoundError where
    their folder is gone, one-line errors for the rest."""
    folder = final.parent
    # Room for the file and a little more: a disk filled to the last byte fails others.
    if shutil.disk_usage(folder).free < len(data) + _SPARE_BYTES:
        raise no_space(folder, needed=len(data) + _SPARE_BYTES)
    try:
        with temporary.open("xb") as raw:
            raw.write(data)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise no_space(folder, error, len(data)) from None
    os.replace(temporary, final)


@contextlib.contextmanager
def in_memory_h5(final: Path) -> Iterator[h5py.File]:
    """Yield an HDF5 file built in memory, written to ``final`` (aside, then renamed) once whole.

    HDF5 never writes to the disk itself: on a full disk its flush fails half-way and can crash
    the process while closing, where a plain write fails cleanly with ENOSPC.
    """
    handle = h5py.File(f"{final.name}.{uuid.uuid4().hex}", "w", driver="core", backing_store=False)
    try:
        yield handle
        handle.flush()
        image = handle.id.get_file_image()
    finally:
        handle.close()
    write_file_aside(final, image)


@contextlib.contextmanager
def atomic_h5(final: Path) -> Iterator[h5py.File]:
    """Yield an HDF5 file that appears at ``final`` only once it is complete and flushed. For
    files too large to build in memory (bundles); the caller checks the free space first.
    What a killed writer of ``final`` left beside it is removed first."""
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_killed_temporaries(final)
    temporary = _temporary_for(final)
    try:
        with h5py.File(temporary, "w") as handle:
            yield handle
        with temporary.open("rb+") as raw:
            os.fsync(raw.fileno())
        os.replace(temporary, final)
    except OSError as error:
        # HDF5 says a full disk in its own words ("file write failed: … errno = 28 …").
        if error.errno == errno.ENOSPC or "errno = 28" in str(error):
            raise no_space(final.parent, None) from None
        if error.errno is None and "write failed" in str(error):
            raise InputError(
                final.parent, f"cannot write on its disk: {first_line(error)}"
            ) from None
        raise
    finally:
        temporary.unlink(missing_ok=True)


def read_stored_image(dataset: h5py.Dataset, where: str) -> np.ndarray:
    """A stored target image, checked like a map: a pixel array of bounded size."""
    _check_stored_image(dataset, where)
    return read_stored_array(dataset, where)


def _check_stored_image(dataset: h5py.Dataset, where: str) -> None:
    shape = dataset.shape
    if len(shape) not in (2, 3) or (len(shape) == 3 and not 1 <= shape[2] <= 4):
        raise UnreadableEntry(where, f"{dataset.name} has shape {list(shape)}, not an image's")
    check_stored_bytes(where, shape, dataset.dtype.itemsize, "a stored image")


@dataclass
class CacheScan:
    """Every run a cache holds: those that read back whole, and every damaged entry's reason."""

    records: list[RunRecord] = field(default_factory=list)
    damaged: list[UnreadableEntry] = field(default_factory=list)


@dataclass(frozen=True)
class WrittenRun:
    """A run just stored: its key, its file's identity (inode, size, time) and what the file
    holds beside the map. A child says it to the runner (:meth:`to_dict`), which takes it
    for the file without reading it back (:meth:`ResultCache.remember_written`)."""

    key: str
    identity: tuple[int, int, int]
    stored: StoredAttributes

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "identity": list(self.identity), **self.stored.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> WrittenRun | None:
        """What a child said it stored, or None where it is not such a thing."""
        if not isinstance(data, dict):
            return None
        key, identity = data.get("key"), data.get("identity")
        stored = StoredAttributes.from_dict(data)
        if stored is None or not isinstance(key, str) or not is_digest(key):
            return None
        if not isinstance(identity, list):
            return None
        if len(identity) != 3 or not all(type(n) is int for n in identity):
            return None
        return cls(key, (identity[0], identity[1], identity[2]), stored)


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    """A file's identity: an entry is replaced by a rename, never changed in place."""
    return (info.st_ino, info.st_size, info.st_mtime_ns)


class ResultCache:
    """A folder of finished runs and of the target images they were computed from."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        # key → (file identity, checked metadata, map checksum): see read_run.
        self._checked: dict[str, tuple[tuple[int, int, int], RunRecord, int | None]] = {}
        # key → (file identity, map): read by checked(), handed to the next read_run (once).
        self._handed_on: dict[str, tuple[tuple[int, int, int], np.ndarray]] = {}
        self._claimed = False  # claim() found the folder a cache (or made it one)

    def __repr__(self) -> str:
        return f"ResultCache({str(self.root)!r})"

    # the folder ---------------------------------------------------------------------------
    def check_usable(self) -> None:
        """A cache path that exists but is not a folder is a usage error, said in one line."""
        if self.root.exists() and not self.root.is_dir():
            raise InputError(self.root, "is not a folder, so it cannot be a segdiff cache")

    def write_problem(self) -> InputError | None:
        """Why new runs could not be stored here (a read-only mount, a folder of another
        user's), said in one line before anything is computed for it, not after each run; None
        where the cache can be written. Its runs can still be read and shown."""
        try:
            descriptor, name = tempfile.mkstemp(prefix=".write-check.", suffix=_TMP_SUFFIX,
                                                dir=self.root)  # fmt: skip
        except OSError as error:
            return InputError(
                self.root,
                f"cannot be written ({error.strerror or error}): the runs it holds are read, "
                "but runs it lacks cannot be stored in it; choose another cache folder for "
                "them",
            )
        os.close(descriptor)
        os.unlink(name)
        return None

    def check_writable(self) -> None:
        """Raise :meth:`write_problem`, if any: before the first write of a command that
        stores what it is given (a merge, an import), so that a read-only cache is said as
        the cache's one line, not as the folder or temporary inside it that failed first."""
        if (problem := self.write_problem()) is not None:
            raise problem

    @property
    def is_marked(self) -> bool:
        """Whether the folder holds segdiff's marker, whole (storage/marker.py)."""
        return marker_state(self.root) is MarkerState.WHOLE

    def claim(self) -> None:
        """Make sure the folder is a segdiff cache before anything is written into it: the one
        rule of what a cache folder is, for every writer and front end. A folder is one when
        it holds segdiff's marker; a new or empty folder becomes one, and a marker a failed
        creation left unfinished is finished; any other folder is refused, whatever the names
        of what it holds (a project's ``images/`` and ``models/`` are the user's). A cache
        that cannot be made leaves nothing: neither a marker nor the folders made for it."""
        if self._claimed and os.path.lexists(self.root / MARKER):
            return  # claimed before, and still marked (one lstat a write)
        self.check_usable()
        state = marker_state(self.root)
        if state is MarkerState.WHOLE:
            self._claimed = True
            return
        if self.root.is_dir():
            # segdiff's own: an unfinished marker (finished below), what a killed claim left,
            # and the runtimes' compilation cache where the folder is the user's default one.
            own = {MARKER, *compilation_entry(self.root)}
            foreign = sorted(
                p.name
                for p in self.root.iterdir()
                if p.name not in own and not is_marker_temporary(p.name)
            )
            if foreign:
                shown = ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")
                raise InputError(
                    self.root,
                    f"is not a segdiff cache: it holds other files ({shown}); choose an empty "
                    "or new folder for the cache",
                )
        if state is MarkerState.FOREIGN:
            # A link, a FIFO or a file of other content where the marker belongs: not ours.
            raise InputError(self.root / MARKER, "is not a segdiff cache marker; not using it")
        made = [p for p in (self.root, *self.root.parents) if not os.path.lexists(p)]
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            write_marker(self.root)
        except OSError as error:
            for folder in made:  # deepest first; only if still empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
            problem = "no space left on its disk" if error.errno == errno.ENOSPC else None
            raise InputError(
                self.root, f"cannot be made a cache ({problem or error.strerror or error})"
            ) from None
        self._claimed = True

    # runs ---------------------------------------------------------------------------------
    def run_path(self, key: str) -> Path:
        checked_digest(key)
        return self.root / "runs" / key[:2] / f"{key}.h5"

    def has(self, key: str) -> bool:
        """Whether a file for ``key`` is there (whole or not: see :meth:`damage`)."""
        return os.path.lexists(self.run_path(key))

    def write_run(self, record: RunRecord) -> WrittenRun:
        """Store ``record``; what was stored, with the file's identity (see read_run)."""
        path = self.run_path(record.key)
        self.claim()  # nothing is written into a folder that is not a cache
        if path.is_dir() and not path.is_symlink():
            # Not something segdiff made: whatever is in it is not ours to delete.
            raise InputError(path, "is a folder where a run belongs; remove it to store the run")
        with in_memory_h5(path) as handle:
            stored = write_record(handle, record, path)
        return WrittenRun(record.key, _identity(path.lstat()), stored)

    def remember_written(self, written: WrittenRun) -> None:
        """Take what a writer (a child) said it stored as the run's checked metadata, as if
        :meth:`read_run` had read it, while the file is the one it wrote (its identity); its
        values are checked as a file's. Where they are not the file's, or not whole, nothing
        is remembered and the next read reads the file."""
        path = self.run_path(written.key)
        try:
            same = _identity(path.lstat()) == written.identity
        except OSError:
            return
        if not same:
            return
        try:
            record, map_crc32 = metadata_of_written(written.stored, str(path))
        except InputError:
            return
        if record.key == written.key:
            self._remember(written.key, written.identity, record, map_crc32)

    def _remember(
        self, key: str, identity: tuple[int, int, int], record: RunRecord, map_crc32: int | None
    ) -> None:
        """``record`` is the checked metadata of ``key``'s file while it has ``identity``."""
        if len(self._checked) >= _REMEMBERED:
            self._checked.clear()
        self._checked[key] = (identity, record, map_crc32)

    def read_run(self, key: str, with_map: bool = True) -> RunRecord:
        """The run ``key``; :class:`UnreadableEntry` (naming the file) if it is damaged.

        A file's checked metadata is remembered while the file is the same one (inode, size,
        time: entries are replaced by renames, never changed), so that planning, then
        reporting, check each run's attributes once."""
        path = self.run_path(key)
        try:
            info = path.lstat()
        except FileNotFoundError:
            raise KeyError(key) from None
        identity = _identity(info)
        known = self._checked.get(key)
        if known is not None and known[0] == identity and not with_map:
            return known[1]
        kept = self._handed_on.pop(key, None)
        if known is not None and known[0] == identity and kept is not None and kept[0] == identity:
            return replace(known[1], probabilities=kept[1])
        with open_h5_for_reading(path, follow_symlinks=False) as handle:
            if known is not None and known[0] == identity:
                record, map_crc32 = known[1], known[2]
            else:
                record, map_crc32 = read_metadata(handle, str(path))
                if record.key != key:
                    raise UnreadableEntry(
                        path, f"holds run {record.key[:16]}, not the run its name says"
                    )
                self._remember(key, identity, record, map_crc32)
            if not with_map:
                return record
            return with_checked_map(record, handle, str(path), map_crc32)

    def checked(self, key: str) -> tuple[RunRecord | None, UnreadableEntry | None]:
        """The stored run ``key`` read whole (map and checksum included) and ``None``; or
        ``None`` and why it cannot be used. The record comes without its map, which is kept
        (a small one) for the next :meth:`read_run` of ``key``: it need not be read twice."""
        try:
            record = self.read_run(key)
        except InputError as error:
            damage = error if isinstance(error, UnreadableEntry) else None
            return None, detached(damage or UnreadableEntry("", str(error)))
        probabilities = record.probabilities
        known = self._checked.get(key)
        kept = sum(entry[1].nbytes for entry in self._handed_on.values())
        small = probabilities is not None and kept + probabilities.nbytes <= _HANDED_ON_BYTES
        if probabilities is not None and known is not None and small:
            self._handed_on[key] = (known[0], probabilities)
        return replace(record, probabilities=None), None

    def damage(self, key: str) -> UnreadableEntry | None:
        """Why the stored run ``key`` cannot be used (map and checksum included), or ``None``."""
        return self.checked(key)[1]

    def keys(self) -> list[str]:
        return sorted(path.stem for path in self._run_files())

    def _run_files(self) -> list[Path]:
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        return [
            path
            for folder in runs.iterdir()
            if len(folder.name) == 2 and folder.is_dir() and not folder.is_symlink()
            for path in folder.iterdir()
            if _RUN_FILE.match(path.name) and path.name.startswith(folder.name)
        ]

    def scan(self, with_maps: bool = False) -> CacheScan:
        """Metadata of every finished run (no pixels), and every entry that cannot be read;
        ``with_maps`` reads and checks the maps too (and drops them)."""
        scan = CacheScan()
        for path in sorted(self._run_files()):
            try:
                record = self.read_run(path.stem, with_map=with_maps)
                scan.records.append(replace(record, probabilities=None))
            except InputError as error:
                entry = error if isinstance(error, UnreadableEntry) else None
                scan.damaged.append(detached(entry or UnreadableEntry(path, error.problem)))
        return scan

    def records(self) -> list[RunRecord]:
        """Metadata of every run that reads back whole (see :meth:`scan` for the others)."""
        return self.scan().records

    # images -------------------------------------------------------------------------------
    def image_path(self, image_hash: str) -> Path:
        checked_digest(image_hash, "image hash")
        return self.root / "images" / f"{image_hash}.h5"

    def has_image(self, image_hash: str) -> bool:
        """Whether the image is kept: a file whose structure and declared image read whole
        (damaged so, it is written again); its pixels are checked by whoever reads them."""
        path = self.image_path(image_hash)
        if not os.path.lexists(path):
            return False
        try:
            with open_h5_for_reading(path, follow_symlinks=False) as handle:
                _check_stored_image(plain_dataset(handle, "image", str(path)), str(path))
        except InputError:
            return False
        return True

    def write_image(self, image_hash: str, name: str, image: np.ndarray) -> None:
        """Keep a decoded target image so results can be shown over it without the original."""
        self.claim()
        with in_memory_h5(self.image_path(image_hash)) as handle:
            # deflated by ISA-L (chunked_write): a sweep keeps thousands
            write_compressed(handle, "image", image, image.dtype.newbyteorder("<").str)
            handle.attrs["name"] = name

    def read_image(self, image_hash: str) -> np.ndarray | None:
        path = self.image_path(image_hash)
        if not os.path.lexists(path):
            return None
        with open_h5_for_reading(path, follow_symlinks=False) as handle:
            return read_stored_image(plain_dataset(handle, "image", str(path)), str(path))

    # housekeeping -------------------------------------------------------------------------
    def remove_stale_temporaries(self, older_than_s: float = 3600.0) -> int:
        """Delete temporary files left by killed writers (a live writer's file is younger):
        only in a marked cache, only in its own subfolders and, for a killed claim's marker,
        its root, only by their exact name."""
        if not self.is_marked:
            return 0
        removed = 0
        cutoff = time.time() - older_than_s
        folders = [self.root, self.root / "images"]
        # Runs, layer probes and comparisons (storage/layers.py) and converted models
        # (storage/converted.py), in folders by key prefix.
        for parent in (
            "runs", "layers/tensors", "layers/compared", "layers/repairs", "converted"
        ):  # fmt: skip
            keyed = self.root / parent
            if keyed.is_dir() and not keyed.is_symlink() and not keyed.parent.is_symlink():
                folders += [p for p in keyed.iterdir() if len(p.name) == 2 and not p.is_symlink()]
        for folder in folders:
            if not folder.is_dir() or folder.is_symlink():
                continue
            ours = is_marker_temporary if folder == self.root else _TEMPORARY.match
            for path in folder.iterdir():
                if not ours(path.name):
                    continue
                with contextlib.suppress(OSError):
                    info = path.lstat()
                    if info.st_mtime < cutoff and path.is_file() and not path.is_symlink():
                        path.unlink()
                        removed += 1
        return removed
