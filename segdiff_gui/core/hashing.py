"""Content hashing: the cache key is made from bytes, never from paths or timestamps."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from segdiff_gui.core.artefacts import artefact_files
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import MAX_MODEL_BYTES, MAX_MODEL_FILES

__all__ = [
    "KEY_SCHEMA",
    "canonical_json",
    "hash_bytes",
    "hash_model",
    "hash_path",
    "model_digest",
    "run_key",
]

# Bump when the meaning of a key's ingredients changes, so old entries are not mistaken for new.
KEY_SCHEMA = 1
_CHUNK = 1 << 20


def hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _update_from_file(digest: Any, path: Path) -> None:
    """Hash a plain file's bytes, as many as it says it holds: a FIFO, a device or a file of
    /proc (which says 0 and never ends) is refused before or while it is read."""
    if not stat.S_ISREG(path.stat().st_mode):  # before open(): a FIFO would block it
        raise InputError(path, "is not a plain file")
    with path.open("rb") as handle:
        remaining = os.fstat(handle.fileno()).st_size
        while remaining > 0 and (chunk := handle.read(min(_CHUNK, remaining))):
            digest.update(chunk)
            remaining -= len(chunk)
        if remaining or handle.read(1):
            raise InputError(path, "is not a plain file (its size changed while it was read)")


def _folder_files(folder: Path) -> list[Path]:
    """A SavedModel folder's files, walked without following a link, within the bounds: a
    link or a special file inside is refused (TensorFlow would follow or open it)."""
    found: list[Path] = []
    total = 0
    for root, folders, files in os.walk(folder, followlinks=False):
        for name in sorted(folders + files):
            entry = Path(root, name)
            status = entry.lstat()
            if stat.S_ISDIR(status.st_mode):
                continue
            if stat.S_ISLNK(status.st_mode):
                raise InputError(folder, f"holds a symbolic link ({entry.relative_to(folder)})")
            if not stat.S_ISREG(status.st_mode):
                raise InputError(folder, f"holds a special file ({entry.relative_to(folder)})")
            found.append(entry)
            total += status.st_size
            if len(found) > MAX_MODEL_FILES or total > MAX_MODEL_BYTES:
                raise InputError(
                    folder,
                    f"holds more than {MAX_MODEL_FILES:,} files or {MAX_MODEL_BYTES >> 30} GiB, "
                    "more than segdiff reads",
                )
    return sorted(found)


def hash_path(path: str | Path) -> str:
    """SHA-256 of a file's bytes, or of a directory's files (relative names and bytes, sorted).

    Directories are SavedModels: their identity is every file inside, not the folder's name.
    Only plain files are read, each no further than its size (see :func:`_folder_files`).
    """
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for file in _folder_files(path):
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
            _update_from_file(digest, file)
            digest.update(b"\0")
    else:
        if path.stat().st_size > MAX_MODEL_BYTES:
            raise InputError(path, f"is over {MAX_MODEL_BYTES >> 30} GiB, more than segdiff reads")
        _update_from_file(digest, path)
    return digest.hexdigest()


def hash_model(path: str | Path) -> str:
    """A model's identity, as every run's key holds it: its file's bytes (a SavedModel
    folder's files), and an artefact made of two files (an OpenVINO IR) by both, each with
    its suffix (:func:`model_digest`): an IR whose ``.bin`` changed is another model."""
    files = artefact_files(path)
    if len(files) == 1:
        return hash_path(path)
    return model_digest([(file.suffix, hash_path(file)) for file in files])


def model_digest(parts: list[tuple[str, str]]) -> str:
    """The identity of a model of several files, from each file's suffix and SHA-256 in
    order (``hash_model``'s, and a child's from the bytes it read)."""
    digest = hashlib.sha256()
    for suffix, file_hash in parts:
        digest.update(suffix.lower().encode() + b"\0" + file_hash.encode() + b"\0")
    return digest.hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text, hence equal hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def run_key(
    *,
    model_hash: str,
    target_hash: str,
    batch_hashes: list[str],
    preprocessing: dict[str, Any],
    output: dict[str, Any],
    config: dict[str, Any],
    repeat: int,
    environment: dict[str, str] | None = None,
    calibration: list[str] | None = None,
    defaults_in_effect: dict[str, Any] | None = None,
    imported: str | None = None,
    batch_position: int | None = None,
    source: str | None = None,
) -> str:
    """The cache key of one run.

    ``batch_hashes`` lists the hash of every image in the batch in order (the target included at
    its position), so the batch context and the target's position are part of the key.
    ``environment`` holds the numerics-changing variables passed to the child (``XLA_FLAGS`` …).
    ``calibration``: the images a full-int8 conversion was calibrated on (their hashes), part
    of the model such a run computes with; absent from the key otherwise, so other keys stay.
    ``defaults_in_effect``: what the knobs left at their default are on this machine where that
    depends on it (core/runtime_defaults.py: oneDNN under TensorFlow); absent when empty.
    ``imported``: the SHA-256 of a map brought in from the user's own pipeline (``segdiff
    import``), which no configuration computed: the same map imported twice is one entry.
    ``batch_position``: a sweep's run, whose batch is the set's consecutive images (the last
    one short, as ``predict`` cuts them) and whose target sits there; absent otherwise (the
    configuration's ``position`` says it), so other keys stay.
    ``source``: the hash of the Keras model an artefact's run sits beside (its group is the
    source's, recorded in it); absent otherwise, so every other key stays.
    """
    ingredients = {
        "schema": KEY_SCHEMA,
        "model": model_hash,
        "target": target_hash,
        "batch": batch_hashes,
        "preprocessing": preprocessing,
        "output": output,
        "config": config,
        "repeat": repeat,
        "environment": environment or {},
    }
    if calibration:
        ingredients["calibration"] = list(calibration)
    if defaults_in_effect:
        ingredients["defaults_in_effect"] = dict(defaults_in_effect)
    if imported:
        ingredients["imported"] = imported
    if batch_position is not None:
        ingredients["batch_position"] = batch_position
    if source:
        ingredients["source"] = source
    return hash_bytes(canonical_json(ingredients).encode())


def imported_map_digest(values: Any) -> str:
    """The SHA-256 an imported map is keyed by: its shape and its little-endian float32
    bytes (the same map imported twice is one entry)."""
    import numpy as np  # here: hashing's other callers need no numpy

    data = np.ascontiguousarray(values, dtype="<f4")
    return hashlib.sha256(f"{list(data.shape)}".encode() + data.tobytes()).hexdigest()
