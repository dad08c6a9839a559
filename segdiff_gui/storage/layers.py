"""Layer probes in the cache: every layer's output under one run's configuration,
and comparisons of two probes.

- ``layers/tensors/<kk>/<probe key>.h5``: one probe (its format: :mod:`probe_files`). Large:
  kept up to the disk budget, least recently used removed first.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.layer_stats import LayerComparison, LayerStats
from segdiff_gui.core.repair import RepairResult
from segdiff_gui.storage.cache import (
    ResultCache,
    atomic_h5,
    checked_digest,
    in_memory_h5,
    open_h5_for_reading,
)
from segdiff_gui.storage.hdf5_access import UnreadableEntry, plain_group
from segdiff_gui.storage.probe_files import (
    MAX_LAYERS,
    PROBE_FORMAT,
    VERSION,
    ProbeTensors,
    ProbeWriter,
    read_array,
    store_array,
)
from segdiff_gui.storage.schema import AttributeReader

__all__ = [
    "LayerStore",
    "StoredComparison",
    "comparison_key",
    "probe_key",
]

COMPARISON_FORMAT = "segdiff-layer-comparison"
REPAIR_FORMAT = "segdiff-precision-repair"


def probe_key(run_key: str) -> str:
    """The probe of the run ``run_key``: the same inputs and configuration, layer by layer."""
    checked_digest(run_key)
    return hashlib.sha256(f"{PROBE_FORMAT}/{VERSION}/{run_key}".encode()).hexdigest()


def _probe_of(run_key: Any, key: str) -> bool:
    """Whether ``key`` is the probe key of the recorded ``run_key``."""
    try:
        return isinstance(run_key, str) and probe_key(run_key) == key
    except InputError:  # not a digest
        return False


def comparison_key(reference_probe: str, other_probe: str) -> str:
    return hashlib.sha256(
        f"{COMPARISON_FORMAT}/{VERSION}/{reference_probe}/{other_probe}".encode()
    ).hexdigest()


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
    except (KeyError, TypeError, ValueError, OverflowError):
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

    def remove_probe(self, key: str) -> None:
        """Remove a probe (a damaged one: derived data, made again when next asked for)."""
        with contextlib.suppress(FileNotFoundError):
            self.probe_path(key).unlink()

    def has_probe(self, key: str) -> bool:
        return os.path.lexists(self.probe_path(key))

    @contextlib.contextmanager
    def write_probe(self, key: str, memory_budget: int) -> Iterator[ProbeWriter]:
        path = self.probe_path(key)
        with atomic_h5(path) as handle:
            yield ProbeWriter(handle, path.parent, memory_budget)

    def open_probe(self, key: str) -> ProbeTensors:
        """The stored probe ``key`` (marked as used now, for the disk budget). Its key is
        recomputed from the run it records: another run's probe copied here is refused."""
        path = self.probe_path(key)
        tensors = ProbeTensors(path)
        run_key = tensors.meta.get("run_key")
        if tensors.meta.get("probe_key") != key or not _probe_of(run_key, key):
            tensors.close()
            raise UnreadableEntry(path, "holds another run's probe than its name says")
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
            attrs["unmatched"] = canonical_json(list(stored.comparison.unmatched))
            attrs["final_source"] = stored.final_source
            spatial = handle.create_group("spatial")
            for index, values in stored.spatial.items():
                store_array(spatial, f"{index:05d}", values)
            final = handle.create_group("final")
            for name, values in zip(("reference", "other"), stored.final_maps, strict=True):
                store_array(final, name, values)

    def read_comparison(self, key: str) -> StoredComparison | None:
        """The stored comparison ``key``; None if there is none; UnreadableEntry if damaged."""
        path = self.comparison_path(key)
        if not os.path.lexists(path):
            return None
        where = str(path)
        with open_h5_for_reading(path, follow_symlinks=False) as handle:
            attrs = AttributeReader(handle, where, "comparison")
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
            # Comparisons stored before converted runtimes had no unmatched layers.
            unmatched = attrs.json("unmatched") if "unmatched" in attrs.names() else []
            if not isinstance(unmatched, list) or not all(isinstance(n, str) for n in unmatched):
                raise UnreadableEntry(path, "lists unmatched layers segdiff did not write")
            if len(unmatched) > MAX_LAYERS:
                raise UnreadableEntry(path, f"lists {len(unmatched):,} unmatched layers")
            spatial_group = plain_group(handle, "spatial", where)
            spatial = {}
            for name in spatial_group:
                if not name.isdigit() or int(name) >= len(stats):
                    raise UnreadableEntry(path, f"has a spatial map for no layer ({name[:20]})")
                spatial[int(name)] = read_array(spatial_group, name, where, "a spatial map")
            final = plain_group(handle, "final", where)
            maps = tuple(read_array(final, n, where, "a final map") for n in ("reference", "other"))
            source = attrs.text("final_source")
            reference, other = sides.get("reference"), sides.get("other")
            if not isinstance(reference, dict) or not isinstance(other, dict):
                raise UnreadableEntry(path, "holds sides segdiff did not write")
            # Its key recomputed from the probes (and runs) it says it compares.
            probes = [side.get("probe_key") for side in (reference, other)]
            if (
                not all(
                    isinstance(probe, str) and _probe_of(side.get("run_key"), probe)
                    for probe, side in zip(probes, (reference, other), strict=True)
                )
                or comparison_key(str(probes[0]), str(probes[1])) != key
            ):
                raise UnreadableEntry(path, "compares other runs than its name says")
            return StoredComparison(
                key,
                reference=reference,
                other=other,
                comparison=LayerComparison(stats, tuple(unmatched)),
                spatial=spatial,
                final_maps=(maps[0], maps[1]),
                final_source=source,
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
            attrs = AttributeReader(handle, str(path), "repair")
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
