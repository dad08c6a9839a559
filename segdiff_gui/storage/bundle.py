"""Bundles: chosen runs (maps, provenance, target images) in one portable HDF5 file.

A GPU server writes a bundle, a laptop merges it into its cache or opens it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import h5py
import numpy as np

from segdiff_gui import __version__
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json, hash_bytes
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.storage.cache import ResultCache, atomic_h5, open_h5_for_reading
from segdiff_gui.storage.records import RunRecord, read_record, write_record

__all__ = ["BundleReader", "MergeResult", "is_bundle", "merge_bundle", "write_bundle"]

_MAGIC = "segdiff-bundle"


def write_bundle(cache: ResultCache, keys: list[str], path: str | Path) -> int:
    """Write the runs ``keys`` of ``cache`` and their target images to ``path``; returns count."""
    path = Path(path)
    with atomic_h5(path) as handle:
        handle.attrs["format"] = _MAGIC
        handle.attrs["segdiff_version"] = __version__
        handle.attrs["created"] = local_timestamp()
        runs, images = handle.create_group("runs"), handle.create_group("images")
        for key in keys:
            record = cache.read_run(key)
            write_record(runs.create_group(key), record)
            image = cache.read_image(record.target_hash)
            if image is not None and record.target_hash not in images:
                dataset = images.create_dataset(
                    record.target_hash, data=image, compression="gzip", shuffle=True
                )
                dataset.attrs["name"] = record.target_name
    return len(keys)


def is_bundle(path: Path) -> bool:
    try:
        with open_h5_for_reading(path) as handle:
            return bool(handle.attrs.get("format") == _MAGIC)
    except InputError:
        return False


class BundleReader:
    """Read a bundle like a cache: ``keys``, ``records``, ``read_run``, ``read_image``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(self.path, "no such bundle file")
        with open_h5_for_reading(self.path) as handle:
            if handle.attrs.get("format") != _MAGIC:
                raise InputError(self.path, "is an HDF5 file but not a segdiff bundle")

    def keys(self) -> list[str]:
        with open_h5_for_reading(self.path) as handle:
            return sorted(handle["runs"].keys())

    def read_run(self, key: str, with_map: bool = True) -> RunRecord:
        with open_h5_for_reading(self.path) as handle:
            if key not in handle["runs"]:
                raise KeyError(key)
            return self._read(handle["runs"][key], with_map)

    def records(self) -> list[RunRecord]:
        with open_h5_for_reading(self.path) as handle:
            return [self._read(group, False) for group in handle["runs"].values()]

    def _read(self, group: h5py.Group, with_map: bool) -> RunRecord:
        try:
            return read_record(group, with_map=with_map)
        except (KeyError, ValueError) as error:
            raise InputError(self.path, f"run {group.name} is unreadable: {error}") from None

    def read_image(self, image_hash: str) -> np.ndarray | None:
        with open_h5_for_reading(self.path) as handle:
            if image_hash not in handle["images"]:
                return None
            return np.asarray(handle["images"][image_hash][()])


@dataclass
class MergeResult:
    added: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    # Same key, other pixels, computed on another machine: kept beside ours under a key that
    # names that machine, so a GPU server's "cpu b1" never hides the laptop's.
    from_other_machines: list[str] = field(default_factory=list)
    # Same key, other pixels, same machine: a nondeterministic configuration; ours is kept.
    conflicts: list[str] = field(default_factory=list)


def _machine(record: RunRecord) -> str:
    provenance = record.provenance
    return canonical_json(
        [provenance.get(name) for name in ("hostname", "device_description", "tf_version")]
    )


def merge_bundle(path: str | Path, cache: ResultCache) -> MergeResult:
    """Add a bundle's runs to ``cache``; runs already there are compared bit for bit."""
    bundle = BundleReader(path)
    result = MergeResult()
    for key in bundle.keys():
        incoming = bundle.read_run(key)
        if incoming.key != key:
            raise InputError(bundle.path, f"run {key[:16]} claims to be run {incoming.key[:16]}")
        assert incoming.probabilities is not None
        if cache.has(key):
            existing = cache.read_run(key)
            assert existing.probabilities is not None
            if existing.probabilities.tobytes() == incoming.probabilities.tobytes():
                result.identical.append(key)
                continue
            if _machine(existing) == _machine(incoming):
                result.conflicts.append(key)
                continue
            elsewhere = hash_bytes(f"{key}:{_machine(incoming)}".encode())
            host = incoming.provenance.get("hostname") or "elsewhere"
            incoming = replace(
                incoming,
                key=elsewhere,
                label=f"{host}: {incoming.label}",  # never mistaken for a local repeat
                provenance={**incoming.provenance, "merged_from_key": key},
            )
            result.from_other_machines.append(elsewhere)
            if cache.has(elsewhere):
                continue
        image = bundle.read_image(incoming.target_hash)
        if image is not None:
            cache.write_image(incoming.target_hash, incoming.target_name, image)
        cache.write_run(incoming)
        result.added.append(incoming.key)
    return result
