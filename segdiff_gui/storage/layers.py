"""Layer probes in the cache (issue 15): every layer's output under one run's configuration,
and comparisons of two probes.

- ``layers/tensors/<kk>/<probe key>.h5``: one probe, the target's slice of every layer's output
  as float32 (low precisions widen exactly), in execution order, each layer in pieces of rows
  so that reading one layer never needs more than a piece at a time; and the probe's own final
  map. Large: kept up to the disk budget, least recently used removed first.
- ``layers/compared/<kk>/<comparison key>.h5``: one comparison, small and always kept: every
  layer's figures, its spatial difference map, and the two final maps the last row's flips
  are counted on.
- ``layers/repairs/<kk>/<key>.h5``: the latest precision repair of a run against a reference
  (the layers, the trials' figures); its trials are runs of the cache.

Written aside and renamed into place like runs; read as untrusted data like runs: plain files
only, hard links only, sizes bounded, every array checked against its CRC-32, and a damaged
entry is one :class:`UnreadableEntry` naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.layer_stats import LayerComparison, LayerStats
from segdiff_gui.core.limits import check_stored_bytes
from segdiff_gui.core.repair import RepairResult
from segdiff_gui.storage.cache import (
    ResultCache,
    atomic_h5,
    checked_digest,
    in_memory_h5,
    no_space,
    open_h5_for_reading,
)
from segdiff_gui.storage.chunked_read import MAX_CHUNK_BYTES, read_stored_array
from segdiff_gui.storage.chunked_write import write_compressed
from segdiff_gui.storage.hdf5_access import UnreadableEntry, plain_dataset, plain_group
from segdiff_gui.storage.records import array_checksum
from segdiff_gui.storage.schema import AttributeReader

__all__ = [
    "LayerInfo",
    "LayerStore",
    "ProbeTensors",
    "ProbeWriter",
    "StoredComparison",
    "comparison_key",
    "probe_key",
]

PROBE_FORMAT, COMPARISON_FORMAT, VERSION = "segdiff-layer-probe", "segdiff-layer-comparison", 1
REPAIR_FORMAT = "segdiff-precision-repair"
# A comparison holds a piece of each side and about six piece-sized temporaries (float64).
_PIECES_IN_MEMORY = 8
_SPARE_BYTES = 1 << 20
MAX_LAYERS = 1 << 14


def probe_key(run_key: str) -> str:
    """The probe of the run ``run_key``: the same inputs and configuration, layer by layer."""
    checked_digest(run_key)
    return hashlib.sha256(f"{PROBE_FORMAT}/{VERSION}/{run_key}".encode()).hexdigest()


def comparison_key(reference_probe: str, other_probe: str) -> str:
    return hashlib.sha256(
        f"{COMPARISON_FORMAT}/{VERSION}/{reference_probe}/{other_probe}".encode()
    ).hexdigest()


def piece_rows(shape: tuple[int, ...], memory_budget: int) -> int:
    """Rows of a layer's output per stored piece: a piece is at most a share of the memory
    budget (and one HDF5 chunk)."""
    row_bytes = 4 * int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 4
    limit = min(memory_budget // _PIECES_IN_MEMORY, MAX_CHUNK_BYTES)
    return max(1, min(shape[0] if shape else 1, limit // max(row_bytes, 1)))


@dataclass(frozen=True)
class LayerInfo:
    index: int
    name: str
    class_name: str
    dtype: str  # the layer's own output dtype (bfloat16, float16, float32 …)
    shape: tuple[int, ...]  # the target's slice
    batch_shape: tuple[int, ...]  # the whole batch's output

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class_name": self.class_name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "batch_shape": list(self.batch_shape),
        }


def _store_array(group: h5py.Group, name: str, values: np.ndarray) -> None:
    data = np.ascontiguousarray(values, dtype="<f4")
    if data.ndim == 0:
        data = data.reshape(1)
    dataset = write_compressed(group, name, data)
    dataset.attrs["crc32"] = array_checksum(data)


def _read_array(group: h5py.Group, name: str, where: str, what: str) -> np.ndarray:
    dataset = plain_dataset(group, name, where)
    if dataset.dtype != np.dtype("<f4") or not 1 <= dataset.ndim <= 4:
        raise UnreadableEntry(where, f"{dataset.name} is not a float32 array segdiff wrote")
    check_stored_bytes(where, dataset.shape, 4, what)
    crc = AttributeReader(dataset.attrs, where, dataset.name).integer("crc32", 0, 2**32)
    values = read_stored_array(dataset, where)
    if array_checksum(values) != crc:
        raise UnreadableEntry(where, f"{dataset.name} does not match its checksum")
    return values


class ProbeWriter:
    """Writes one probe as its layers come, each cut into pieces of rows (see
    :func:`piece_rows`); the file appears only once :meth:`finish` ran and it is whole."""

    def __init__(self, handle: h5py.File, folder: Path, memory_budget: int) -> None:
        self._handle = handle
        self._layers = handle.create_group("layers")
        self._folder = folder
        self._budget = memory_budget
        self.count = 0
        self.bytes = 0

    def add(
        self,
        name: str,
        class_name: str,
        dtype: str,
        batch_shape: tuple[int, ...],
        values: np.ndarray,
    ) -> None:
        if self.count >= MAX_LAYERS:
            raise ValueError(f"more than {MAX_LAYERS:,} layer outputs")
        data = np.asarray(values, dtype=np.float32)
        needed = data.nbytes + _SPARE_BYTES
        if shutil.disk_usage(self._folder).free < needed:
            raise no_space(self._folder, needed=needed)
        group = self._layers.create_group(f"{self.count:05d}")
        info = LayerInfo(self.count, name, class_name, dtype, data.shape, tuple(batch_shape))
        group.attrs["layer"] = canonical_json(info.to_dict())
        rows = piece_rows(data.shape, self._budget)
        flat = data.reshape(1) if data.ndim == 0 else data
        pieces = range(0, flat.shape[0], rows)
        for number, start in enumerate(pieces):
            _store_array(group, f"p{number:05d}", flat[start : start + rows])
        group.attrs["pieces"] = len(pieces)
        self.count += 1
        self.bytes += data.nbytes

    def finish(self, meta: dict[str, Any], final_map: np.ndarray) -> None:
        _store_array(self._handle, "final_map", final_map)
        attrs = self._handle.attrs
        attrs["format"], attrs["version"] = PROBE_FORMAT, VERSION
        attrs["layer_count"] = self.count
        attrs["tensor_bytes"] = self.bytes
        attrs["meta"] = canonical_json(meta)


class ProbeTensors:
    """A stored probe, read layer by layer (one piece at a time) as untrusted data."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self._handle = open_h5_for_reading(path, follow_symlinks=False)
        try:
            attrs = AttributeReader(self._handle.attrs, self.where, "probe")
            if attrs.text("format") != PROBE_FORMAT or attrs.integer("version", 0, 99) != VERSION:
                raise UnreadableEntry(path, "is not a segdiff layer probe of this version")
            count = attrs.integer("layer_count", 0, MAX_LAYERS)
            self.tensor_bytes = attrs.integer("tensor_bytes", 0, 2**62)
            meta = attrs.json("meta")
            if not isinstance(meta, dict):
                raise attrs.fail("meta", "is not a JSON object")
            self.meta: dict[str, Any] = meta
            group = plain_group(self._handle, "layers", self.where)
            self.layers = [self._info(group, index) for index in range(count)]
        except BaseException:
            self._handle.close()
            raise

    def _info(self, group: h5py.Group, index: int) -> LayerInfo:
        layer = plain_group(group, f"{index:05d}", self.where)
        attrs = AttributeReader(layer.attrs, self.where, layer.name)
        data = attrs.json("layer")
        try:
            info = LayerInfo(
                index,
                str(data["name"]),
                str(data["class_name"]),
                str(data["dtype"]),
                tuple(int(d) for d in data["shape"]),
                tuple(int(d) for d in data["batch_shape"]),
            )
        except (KeyError, TypeError, ValueError):
            raise attrs.fail("layer", "is not a layer's description") from None
        check_stored_bytes(self.where, info.shape, 4, f"layer {info.name}")
        return info

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> ProbeTensors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pieces(self, index: int) -> Iterator[np.ndarray]:
        """Layer ``index``'s output, in pieces of rows, each checked; together its shape."""
        info = self.layers[index]
        group = plain_group(
            plain_group(self._handle, "layers", self.where), f"{index:05d}", self.where
        )
        count = AttributeReader(group.attrs, self.where, group.name).integer("pieces", 1, 2**20)
        rows = 0
        trailing = info.shape[1:] if info.shape else ()
        for number in range(count):
            piece = _read_array(group, f"p{number:05d}", self.where, f"layer {info.name}")
            if piece.shape[1:] != trailing:
                raise UnreadableEntry(
                    self.where,
                    f"layer {info.name}'s piece {number} is "
                    f"{list(piece.shape)}, not rows of {list(info.shape)}",
                )
            rows += piece.shape[0]
            yield piece if info.shape else piece.reshape(())
        if rows != (info.shape[0] if info.shape else 1):
            raise UnreadableEntry(
                self.where,
                f"layer {info.name} has {rows} rows stored, "
                f"not {info.shape[0] if info.shape else 1}",
            )

    def layer(self, index: int) -> np.ndarray:
        """Layer ``index``'s whole output (for tests and small layers)."""
        parts = list(self.pieces(index))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def final_map(self) -> np.ndarray:
        return _read_array(self._handle, "final_map", self.where, "a probe's final map")


@dataclass(frozen=True)
class StoredComparison:
    """Two probes compared: figures per layer, spatial maps, the two final maps."""

    key: str
    reference: dict[str, Any]  # each side: label, run key, probe key, final check, times
    other: dict[str, Any]
    comparison: LayerComparison
    spatial: dict[int, np.ndarray]  # layer index → H×W max |Δ| over channels
    final_maps: tuple[np.ndarray, np.ndarray]
    final_source: str  # "plain runs" (the probe is bit-exact) or "probe"


def _stats_of(data: Any, where: str) -> LayerStats:
    try:
        return LayerStats.from_dict(data)
    except (KeyError, TypeError, ValueError):
        raise UnreadableEntry(where, "holds a layer's figures segdiff did not write") from None


class LayerStore:
    """The ``layers`` part of a cache: probes (within a disk budget) and comparisons."""

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache
        self.root = cache.root / "layers"

    def _path(self, kind: str, key: str) -> Path:
        checked_digest(key, f"{kind} key")
        return self.root / kind / key[:2] / f"{key}.h5"

    def probe_path(self, key: str) -> Path:
        return self._path("tensors", key)

    def has_probe(self, key: str) -> bool:
        return os.path.lexists(self.probe_path(key))

    @contextlib.contextmanager
    def write_probe(self, key: str, memory_budget: int) -> Iterator[ProbeWriter]:
        path = self.probe_path(key)
        with atomic_h5(path) as handle:
            yield ProbeWriter(handle, path.parent, memory_budget)

    def open_probe(self, key: str) -> ProbeTensors:
        """The stored probe ``key`` (marked as used now, for the disk budget)."""
        path = self.probe_path(key)
        tensors = ProbeTensors(path)
        with contextlib.suppress(OSError):
            os.utime(path)
        return tensors

    def comparison_path(self, key: str) -> Path:
        return self._path("compared", key)

    def write_comparison(self, stored: StoredComparison) -> None:
        with in_memory_h5(self.comparison_path(stored.key)) as handle:
            attrs = handle.attrs
            attrs["format"], attrs["version"] = COMPARISON_FORMAT, VERSION
            attrs["key"] = stored.key
            attrs["sides"] = canonical_json({"reference": stored.reference, "other": stored.other})
            attrs["layers"] = canonical_json([s.to_dict() for s in stored.comparison.layers])
            attrs["final_source"] = stored.final_source
            spatial = handle.create_group("spatial")
            for index, values in stored.spatial.items():
                _store_array(spatial, f"{index:05d}", values)
            final = handle.create_group("final")
            for name, values in zip(("reference", "other"), stored.final_maps, strict=True):
                _store_array(final, name, values)

    def read_comparison(self, key: str) -> StoredComparison | None:
        """The stored comparison ``key``; None if there is none; UnreadableEntry if damaged."""
        path = self.comparison_path(key)
        if not os.path.lexists(path):
            return None
        where = str(path)
        with open_h5_for_reading(path, follow_symlinks=False) as handle:
            attrs = AttributeReader(handle.attrs, where, "comparison")
            if attrs.text("format") != COMPARISON_FORMAT or attrs.integer("version", 0, 99) != 1:
                raise UnreadableEntry(path, "is not a segdiff layer comparison of this version")
            if attrs.digest("key") != key:
                raise UnreadableEntry(path, "holds another comparison than its name says")
            sides = attrs.json("sides")
            layers = attrs.json("layers")
            if not isinstance(sides, dict) or not isinstance(layers, list):
                raise UnreadableEntry(path, "holds sides or layers segdiff did not write")
            if len(layers) > MAX_LAYERS:
                raise UnreadableEntry(path, f"lists {len(layers):,} layers")
            stats = tuple(_stats_of(item, where) for item in layers)
            spatial_group = plain_group(handle, "spatial", where)
            spatial = {}
            for name in spatial_group:
                if not name.isdigit() or int(name) >= len(stats):
                    raise UnreadableEntry(path, f"has a spatial map for no layer ({name[:20]})")
                spatial[int(name)] = _read_array(spatial_group, name, where, "a spatial map")
            final = plain_group(handle, "final", where)
            maps = tuple(
                _read_array(final, n, where, "a final map") for n in ("reference", "other")
            )
            source = attrs.text("final_source")
            reference, other = sides.get("reference"), sides.get("other")
            if not isinstance(reference, dict) or not isinstance(other, dict):
                raise UnreadableEntry(path, "holds sides segdiff did not write")
            return StoredComparison(
                key, reference, other, LayerComparison(stats), spatial, (maps[0], maps[1]), source
            )

    # repairs ------------------------------------------------------------------------------
    def repair_path(self, target_run: str, reference_run: str) -> Path:
        key = hashlib.sha256(f"segdiff-repair/{VERSION}/{target_run}/{reference_run}".encode())
        return self._path("repairs", key.hexdigest())

    def write_repair(self, target_run: str, reference_run: str, result: RepairResult) -> None:
        """The latest repair of ``target_run`` against ``reference_run`` (small; kept)."""
        with in_memory_h5(self.repair_path(target_run, reference_run)) as handle:
            handle.attrs["format"], handle.attrs["version"] = REPAIR_FORMAT, VERSION
            handle.attrs["runs"] = canonical_json([target_run, reference_run])
            handle.attrs["repair"] = canonical_json(result.to_dict())

    def read_repair(self, target_run: str, reference_run: str) -> RepairResult | None:
        """The stored repair; None if there is none; UnreadableEntry if it is damaged."""
        path = self.repair_path(target_run, reference_run)
        if not os.path.lexists(path):
            return None
        with open_h5_for_reading(path, follow_symlinks=False) as handle:
            attrs = AttributeReader(handle.attrs, str(path), "repair")
            if attrs.text("format") != REPAIR_FORMAT or attrs.integer("version", 0, 99) != 1:
                raise UnreadableEntry(path, "is not a segdiff repair of this version")
            if attrs.json("runs") != [target_run, reference_run]:
                raise UnreadableEntry(path, "holds the repair of other runs than its name says")
            data = attrs.json("repair")
            try:
                return RepairResult.from_dict(data)
            except (KeyError, TypeError, ValueError):
                raise UnreadableEntry(path, "holds a repair segdiff did not write") from None

    # the disk budget -----------------------------------------------------------------------
    def _probe_files(self) -> list[Path]:
        folder = self.root / "tensors"
        if not folder.is_dir() or folder.is_symlink():
            return []
        return [
            path
            for sub in folder.iterdir()
            if len(sub.name) == 2 and sub.is_dir() and not sub.is_symlink()
            for path in sub.iterdir()
            if path.suffix == ".h5"
            and len(path.stem) == 64
            and path.is_file()
            and not path.is_symlink()
        ]

    def tensor_bytes(self) -> int:
        return sum(path.stat().st_size for path in self._probe_files())

    def keep_within(self, disk_budget: int) -> list[str]:
        """Remove stored probes, least recently used first, until their files take at most
        ``disk_budget`` bytes; returns the removed probes' keys. Comparisons stay."""
        files = sorted(self._probe_files(), key=lambda p: p.stat().st_mtime_ns)
        total = sum(path.stat().st_size for path in files)
        removed = []
        for path in files:
            if total <= disk_budget:
                break
            size = path.stat().st_size
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                removed.append(path.stem)
        return removed
