"""The result cache: one small HDF5 file per finished run, written aside and renamed into place.

Why one file per run: a process killed at any moment can leave at most its own temporary file
truncated, never a finished run; two processes writing the same cache never share an open HDF5
file; readers only ever open complete, immutable files.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
from platformdirs import user_cache_dir

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage.records import RunRecord, read_record, write_record

__all__ = ["ResultCache", "atomic_h5", "checked_digest", "default_cache_dir"]

_TMP_SUFFIX = ".tmp"
# Keys and content hashes are SHA-256 hex digests; anything else (e.g. "../x" from a crafted
# bundle) must never become part of a path.
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def checked_digest(value: str, what: str = "key") -> str:
    if not _DIGEST.match(value):
        raise InputError(value[:80], f"is not a valid run {what} (64 hex digits expected)")
    return value


def default_cache_dir() -> Path:
    """``$SEGDIFF_CACHE`` if set, else the platform's user cache folder (``~/.cache/segdiff``)."""
    override = os.environ.get("SEGDIFF_CACHE")
    return Path(override) if override else Path(user_cache_dir("segdiff", appauthor=False))


@contextlib.contextmanager
def atomic_h5(final: Path) -> Iterator[h5py.File]:
    """Yield an HDF5 file that appears at ``final`` only once it is complete and flushed."""
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_TMP_SUFFIX}")
    try:
        with h5py.File(temporary, "w") as handle:
            yield handle
        with temporary.open("rb+") as raw:
            os.fsync(raw.fileno())
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)


def open_h5_for_reading(path: Path) -> h5py.File:
    """Open a finished file; locking is pointless for immutable files and fails on some mounts."""
    try:
        return h5py.File(path, "r", locking=False)
    except OSError as error:
        raise InputError(path, f"not a readable HDF5 file ({error})") from None


class ResultCache:
    """A folder of finished runs and of the target images they were computed from."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()

    def __repr__(self) -> str:
        return f"ResultCache({str(self.root)!r})"

    # runs -------------------------------------------------------------------------------
    def run_path(self, key: str) -> Path:
        checked_digest(key)
        return self.root / "runs" / key[:2] / f"{key}.h5"

    def has(self, key: str) -> bool:
        return self.run_path(key).is_file()

    def check_usable(self) -> None:
        """A cache path that exists but is not a folder is a usage error, said in one line."""
        if self.root.exists() and not self.root.is_dir():
            raise InputError(self.root, "is not a folder, so it cannot be a segdiff cache")

    def write_run(self, record: RunRecord) -> Path:
        path = self.run_path(record.key)
        with atomic_h5(path) as handle:
            write_record(handle, record)
        return path

    def read_run(self, key: str, with_map: bool = True) -> RunRecord:
        path = self.run_path(key)
        if not path.is_file():
            raise KeyError(key)
        with open_h5_for_reading(path) as handle:
            return read_record(handle, with_map=with_map)

    def keys(self) -> list[str]:
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        return sorted(p.stem for p in runs.glob("*/*.h5") if _DIGEST.match(p.stem))

    def records(self) -> list[RunRecord]:
        """Metadata of every finished run (no pixels); unreadable files are skipped."""
        found = []
        for key in self.keys():
            try:
                found.append(self.read_run(key, with_map=False))
            except (InputError, KeyError, OSError, ValueError):
                continue  # a file from a newer segdiff, or damaged by hand: not ours to list
        return found

    # images -----------------------------------------------------------------------------
    def image_path(self, image_hash: str) -> Path:
        checked_digest(image_hash, "image hash")
        return self.root / "images" / f"{image_hash}.h5"

    def write_image(self, image_hash: str, name: str, image: np.ndarray) -> None:
        """Keep a decoded target image so results can be shown over it without the original."""
        path = self.image_path(image_hash)
        if path.is_file():
            return
        with atomic_h5(path) as handle:
            handle.create_dataset("image", data=image, compression="gzip", shuffle=True)
            handle.attrs["name"] = name

    def read_image(self, image_hash: str) -> np.ndarray | None:
        path = self.image_path(image_hash)
        if not path.is_file():
            return None
        with open_h5_for_reading(path) as handle:
            return np.asarray(handle["image"][()])

    # housekeeping -----------------------------------------------------------------------
    def remove_stale_temporaries(self, older_than_s: float = 3600.0) -> int:
        """Delete temporary files left by killed writers (a live writer's file is younger)."""
        removed = 0
        cutoff = time.time() - older_than_s
        for path in self.root.glob(f"**/.*{_TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
        return removed
