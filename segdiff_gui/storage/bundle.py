"""Bundles: chosen runs (maps, provenance, target images) in one portable HDF5 file.

A GPU server writes a bundle, a laptop merges it into its cache or opens it directly. A bundle
is untrusted data: every run in it is read through the same schema as a cache entry (key
recomputed from its inputs, checksums, shapes), a damaged run is reported and costs only itself
when a bundle is opened, and a merge is all or nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import h5py
import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import MAX_BUNDLE_RUNS
from segdiff_gui.core.test_sets import ShardManifest
from segdiff_gui.core.text import printable
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.storage.cache import (
    CacheScan,
    ResultCache,
    atomic_h5,
    no_space,
    open_h5_for_reading,
    read_stored_image,
)
from segdiff_gui.storage.hdf5_access import (
    UnreadableEntry,
    detached,
    h5py_damage,
    has_member,
    member_names,
    plain_dataset,
    plain_group,
)
from segdiff_gui.storage.records import (
    RunRecord,
    elsewhere_key,
    read_metadata,
    with_checked_map,
    write_record,
)
from segdiff_gui.storage.schema import AttributeReader, is_digest
from segdiff_gui.storage.set_manifests import (
    MANIFEST_ATTRIBUTE,
    manifests_text,
    read_manifest_attribute,
    write_cache_manifest,
)
from segdiff_gui.storage.studies import target_image
from segdiff_gui.version import __version__

__all__ = ["BundleReader", "MergeResult", "is_bundle", "merge_bundle", "write_bundle"]

_MAGIC = "segdiff-bundle"
_SPARE_BYTES = 4 << 20


def _stored_bytes(paths: list[Path]) -> int:
    return sum(path.stat().st_size for path in paths if path.is_file())


def write_bundle(
    cache: ResultCache,
    keys: list[str],
    path: str | Path,
    manifests: Sequence[ShardManifest] = (),
) -> int:
    """Write the runs ``keys`` of ``cache`` and their target images to ``path``, with the
    ``manifests`` of the sweeps (or shards of them) they are; returns the count.

    The free space is checked first (the bundle is about the size of the runs' files): HDF5
    writing onto a full disk fails half-way and can crash while closing."""
    path = Path(path)
    if len(keys) > MAX_BUNDLE_RUNS:  # never written where it would be refused when read
        raise InputError(
            path,
            f"would hold {len(keys):,} runs, over segdiff's bound of {MAX_BUNDLE_RUNS:,} runs in "
            "one bundle; bundle them in parts",
        )
    text = manifests_text(manifests, path) if manifests else None
    records = [cache.read_run(key) for key in keys]  # damaged runs fail here, named
    hashes = sorted({record.target_hash for record in records})
    needed = _stored_bytes([cache.run_path(key) for key in keys])
    needed += _stored_bytes([cache.image_path(h) for h in hashes]) + _SPARE_BYTES
    folder = path.resolve().parent
    if shutil.disk_usage(folder).free < needed:
        raise no_space(folder, needed=needed)
    try:
        with atomic_h5(path) as handle:
            handle.attrs["format"] = _MAGIC
            handle.attrs["segdiff_version"] = __version__
            handle.attrs["created"] = local_timestamp()
            if text is not None:
                handle.attrs[MANIFEST_ATTRIBUTE] = text
            runs, images = handle.create_group("runs"), handle.create_group("images")
            for record in records:
                write_record(runs.create_group(record.key), record, path)
                if record.target_hash in images:
                    continue
                image, _ = target_image(cache, record.target_hash)  # a damaged one stays
                if image is not None:
                    dataset = images.create_dataset(
                        record.target_hash, data=image, compression="gzip", shuffle=True
                    )
                    dataset.attrs["name"] = record.target_name
    except OSError as error:
        raise no_space(folder, error, needed) from None
    return len(records)


def is_bundle(path: Path) -> bool:
    try:
        BundleReader(path)
    except (InputError, OSError):
        return False
    return True


class BundleReader:
    """Read a bundle like a cache: ``keys``, ``scan``, ``records``, ``read_run``, ``read_image``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with self._open() as handle:
            attrs = AttributeReader(handle, str(self.path), "the file's")
            if "format" not in attrs.names() or attrs.text("format") != _MAGIC:
                raise InputError(self.path, "is an HDF5 file but not a segdiff bundle")
            runs = plain_group(handle, "runs", str(self.path))
            with h5py_damage(runs, str(self.path), "the member table of /runs"):
                count = len(runs)  # from the group's header: no name is read
            if count > MAX_BUNDLE_RUNS:  # each a run to check: minutes, before one is refused
                raise InputError(
                    self.path,
                    f"names {count:,} runs, over segdiff's bound of {MAX_BUNDLE_RUNS:,} runs in "
                    "one bundle",
                )
            #: The shards of test sets its runs are (the sweep's that wrote it, or those a
            #: cache's bundle carries on); none for runs of no recorded sweep.
            self.manifests = read_manifest_attribute(attrs)

    def _open(self) -> h5py.File:
        if not os.path.lexists(self.path):
            raise InputError(self.path, "no such bundle file")
        return open_h5_for_reading(self.path)

    def _runs(self, handle: h5py.File) -> h5py.Group:
        return plain_group(handle, "runs", str(self.path))

    def keys(self) -> list[str]:
        """The names of the runs it holds (each still to be read and checked)."""
        with self._open() as handle:
            return _names(self._runs(handle), str(self.path))[0]

    def read_run(self, key: str, with_map: bool = True) -> RunRecord:
        with self._open() as handle:
            runs = self._runs(handle)
            if not has_member(runs, key, str(self.path)):
                raise KeyError(key)
            return self._read(runs, key, with_map, _Stored())

    def _read(self, runs: h5py.Group, key: str, with_map: bool, stored: _Stored) -> RunRecord:
        """The run named ``key``; its stored object's metadata is read once (``stored``),
        whatever the number of names it is linked under."""
        where = str(self.path)
        if not is_digest(key):
            raise UnreadableEntry(where, f"holds a run named {printable(key[:40])!r}, not a key")
        address = stored.addresses.get(key)
        read = stored.metadata.get(address) if address is not None else None
        group = None
        if read is None:
            group = plain_group(runs, key, where)
            try:
                read = read_metadata(group, where)
            except InputError as error:  # said again for every name of this object
                read = detached(_as_entry(error, self.path))
            if address is not None:
                stored.metadata[address] = read
        if isinstance(read, UnreadableEntry):
            raise read
        record, map_crc32 = read
        if record.key != key:  # before its map is read: a run linked under many names is cheap
            raise UnreadableEntry(where, f"run {key[:16]} claims to be run {record.key[:16]}")
        if not with_map:
            return record
        group = group or plain_group(runs, key, where)
        return with_checked_map(record, group, where, map_crc32)

    def scan(self, with_maps: bool = False) -> CacheScan:
        """Every run that reads back whole (metadata only, unless ``with_maps``: then maps and
        their checksums are checked too, and dropped), and why each other one does not."""
        scan = CacheScan()
        with self._open() as handle:
            runs = self._runs(handle)
            keys, odd = _names(runs, str(self.path))
            for _ in range(odd):
                scan.damaged.append(
                    UnreadableEntry(self.path, "holds a run whose name is not text")
                )
            stored = _Stored(_hard_links(runs, str(self.path)))
            for key in keys:
                try:
                    record = self._read(runs, key, with_maps, stored)
                except InputError as error:
                    scan.damaged.append(detached(_as_entry(error, self.path)))
                    continue
                scan.records.append(replace(record, probabilities=None))
        return scan

    def records(self) -> list[RunRecord]:
        return self.scan().records

    def read_image(self, image_hash: str) -> np.ndarray | None:
        where = str(self.path)
        with self._open() as handle:
            if not has_member(handle, "images", where) or not has_member(
                plain_group(handle, "images", where), image_hash, where
            ):
                return None
            dataset = plain_dataset(plain_group(handle, "images", where), image_hash, where)
            return read_stored_image(dataset, where)


@dataclass
class _Stored:
    """The runs a bundle stores, by object: each name's object (its address in the file, for
    the names that are hard links) and what its metadata read as (the run and its map's
    checksum, or why it cannot be read)."""

    addresses: dict[str, int] = field(default_factory=dict)
    metadata: dict[int, tuple[RunRecord, int | None] | UnreadableEntry] = field(
        default_factory=dict
    )


def _hard_links(group: h5py.Group, where: str) -> dict[str, int]:
    """The address of the object each hard link of ``group`` names (text names only), from
    its link table in one pass: no object is opened."""
    found: dict[str, int] = {}

    def visit(name: bytes, info: h5py.h5l.LinkInfo) -> None:
        if info.type == h5py.h5l.TYPE_HARD:
            with contextlib.suppress(UnicodeDecodeError):
                found[name.decode("utf-8")] = info.u

    with h5py_damage(group, where, f"the member table of {group.name}"):
        group.id.links.iterate(visit, info=True)
    return found


def _names(group: h5py.Group, where: str) -> tuple[list[str], int]:
    """A group's member names that are text, sorted; and how many are not (h5py gives a name
    that is not UTF-8 as bytes)."""
    names = member_names(group, where)
    text = sorted(name for name in names if isinstance(name, str))
    return text, len(names) - len(text)


def _as_entry(error: InputError, path: Path) -> UnreadableEntry:
    if isinstance(error, UnreadableEntry):
        return error
    return UnreadableEntry(path, error.problem if error.path else str(error))


@dataclass
class MergeResult:
    added: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    # Same key, other pixels, computed on another machine: kept beside ours under a key that
    # names that machine, so a GPU server's "cpu b1" never hides the laptop's.
    from_other_machines: list[str] = field(default_factory=list)
    # Same key, other pixels, same machine: a nondeterministic configuration; ours is kept.
    conflicts: list[str] = field(default_factory=list)
    # Our copy was damaged: the bundle's whole one replaced it.
    repaired: list[str] = field(default_factory=list)
    # The shards of test sets the bundle's runs are, now kept in the cache too.
    manifests: list[ShardManifest] = field(default_factory=list)


def check_bundle(path: str | Path) -> BundleReader:
    """Read every run of a bundle whole (maps and checksums too) and refuse the bundle, naming
    the run and what is wrong, if any one cannot be read: a merge is all or nothing."""
    bundle = BundleReader(path)
    scan = bundle.scan(with_maps=True)
    for image_hash in sorted({record.target_hash for record in scan.records}):
        try:  # a target image that would enter the cache is read whole, like the maps
            bundle.read_image(image_hash)
        except InputError as error:
            scan.damaged.append(detached(_as_entry(error, bundle.path)))
    if scan.damaged:
        first = scan.damaged[0]
        more = (
            f" (and {len(scan.damaged) - 1:,} more damaged runs)" if len(scan.damaged) > 1 else ""
        )
        raise UnreadableEntry(first.path, f"{first.problem}{more}; nothing was merged")
    return bundle


def _merged(record: RunRecord, bundle: BundleReader) -> RunRecord:
    """The run as this cache keeps it: marked with the bundle it came from."""
    provenance = record.provenance.updated(
        {"merged_from_bundle": printable(bundle.path.name), "merged_at": local_timestamp()}
    )
    return replace(record, provenance=provenance)


def _same_bits(first: np.ndarray, second: np.ndarray) -> bool:
    """Bit for bit (NaN payloads and -0 included), a block of rows at a time: comparing two
    16384² maps through ``tobytes`` held four copies."""
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    a, b = (
        first.view(np.uint8).reshape(len(first), -1),
        second.view(np.uint8).reshape(len(first), -1),
    )
    rows = max(1, (16 << 20) // max(1, a.shape[1]))
    return all(np.array_equal(a[i : i + rows], b[i : i + rows]) for i in range(0, len(a), rows))


def _plan_merge(bundle: BundleReader, cache: ResultCache) -> Iterator[tuple[str, RunRecord]]:
    """What to do with each run: ``(outcome, record to write or compared)``."""
    for key in bundle.keys():
        incoming = bundle.read_run(key)
        assert incoming.probabilities is not None
        if not cache.has(key):
            yield "added", incoming
            continue
        if cache.damage(key) is not None:
            yield "repaired", incoming
            continue
        existing = cache.read_run(key)
        assert existing.probabilities is not None
        if _same_bits(existing.probabilities, incoming.probabilities):
            yield "identical", incoming
        elif existing.provenance.machine == incoming.provenance.machine:
            yield "conflicts", incoming
        else:
            yield "from_other_machines", incoming


def merge_bundle(path: str | Path, cache: ResultCache) -> MergeResult:
    """Add a bundle's runs to ``cache``, all or none; runs already there are compared bit for
    bit. Every run added is marked with the bundle it came from."""
    bundle = check_bundle(path)
    cache.claim()
    needed = bundle.path.stat().st_size + _SPARE_BYTES
    if shutil.disk_usage(cache.root).free < needed:
        raise no_space(cache.root, needed=needed)
    result = MergeResult()
    written: list[Path] = []  # what this merge added: taken back if it fails
    writable = False
    try:
        for outcome, incoming in _plan_merge(bundle, cache):
            key = incoming.key
            if outcome in ("identical", "conflicts"):
                getattr(result, outcome).append(key)
                continue
            if not writable:  # before the first write: a read-only cache is its one line
                cache.check_writable()
                writable = True
            record = _merged(incoming, bundle)
            if outcome == "from_other_machines":
                elsewhere = elsewhere_key(key, incoming)
                record = replace(
                    record,
                    key=elsewhere,
                    provenance=record.provenance.updated({"merged_from_key": key}),
                )
                result.from_other_machines.append(elsewhere)
                if cache.has(elsewhere) and cache.damage(elsewhere) is None:
                    continue
            if not cache.has_image(record.target_hash):
                image, _ = target_image(bundle, record.target_hash)  # checked whole above
                if image is not None:
                    cache.write_image(record.target_hash, record.target_name, image)
                    written.append(cache.image_path(record.target_hash))
            if outcome == "repaired":
                result.repaired.append(key)
            else:
                written.append(cache.run_path(record.key))
            cache.write_run(record)
            result.added.append(record.key)
        for manifest in bundle.manifests:
            write_cache_manifest(cache, manifest)
        result.manifests = list(bundle.manifests)
    except BaseException:
        for added in written:  # all or nothing: take back what this merge added
            added.unlink(missing_ok=True)
        raise
    return result
