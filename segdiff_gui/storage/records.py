"""What one finished run is, and how it sits in an HDF5 group.

The same group layout serves a cache entry file (its root group) and a run inside a bundle
(``/runs/<key>``), so moving results between machines never re-encodes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage.chunked_read import read_map

__all__ = ["FORMAT_VERSION", "RunRecord", "read_record", "write_record"]

FORMAT_VERSION = 1
_MAP = "probabilities"
_PROVENANCE = "provenance"
_ENCODED = "_json_encoded"
_JSON_ATTRS = (
    "config",
    "preprocessing",
    "output",
    "batch_hashes",
    "batch_names",
    "raw_output_shape",
)
_TEXT_ATTRS = (
    "key",
    "label",
    "model_name",
    "model_hash",
    "target_name",
    "target_hash",
    "output_name",
    "kind",
)


@dataclass(frozen=True)
class RunRecord:
    """One run's result and everything needed to tell where it came from.

    ``probabilities`` is float32 H×W (one sigmoid channel) or H×W×C (softmax), or ``None`` when
    only the metadata was read. ``kind`` is ``sigmoid`` or ``softmax``.
    """

    key: str
    label: str
    config: dict[str, Any]
    repeat: int
    model_name: str
    model_hash: str
    target_name: str
    target_hash: str
    batch_hashes: list[str]
    batch_names: list[str]
    preprocessing: dict[str, Any]
    output: dict[str, Any]
    output_name: str
    kind: str
    raw_output_shape: list[int | None]
    map_shape: tuple[int, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    probabilities: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def run_config(self) -> RunConfig:
        return RunConfig.from_dict(self.config)

    @property
    def short_id(self) -> str:
        return self.key[:8]


def write_record(group: h5py.Group, record: RunRecord) -> None:
    """Write ``record`` (which must carry its map) into an empty group."""
    if record.probabilities is None:
        raise ValueError("a record needs its probability map to be written")
    data = np.ascontiguousarray(record.probabilities, dtype=np.float32)
    chunks = tuple(min(n, 256) for n in data.shape[:2]) + data.shape[2:]
    # gzip+shuffle is lossless and readable by every HDF5 build (no plugin needed elsewhere).
    group.create_dataset(
        _MAP, data=data, chunks=chunks, compression="gzip", compression_opts=4, shuffle=True
    )
    attrs = group.attrs
    attrs["format_version"] = FORMAT_VERSION
    attrs["repeat"] = record.repeat
    for name in _TEXT_ATTRS:
        attrs[name] = getattr(record, name)
    for name in _JSON_ATTRS:
        attrs[name] = json.dumps(getattr(record, name))
    provenance = group.create_group(_PROVENANCE)
    encoded = []
    for name, value in record.provenance.items():
        if isinstance(value, (int, float, str)):
            provenance.attrs[name] = value
        else:  # lists and dicts as JSON text, named so reading gives them back as they were
            provenance.attrs[name] = json.dumps(value)
            encoded.append(name)
    provenance.attrs[_ENCODED] = json.dumps(encoded)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_record(group: h5py.Group, with_map: bool = True) -> RunRecord:
    """Read a record written by :func:`write_record`; ``with_map=False`` skips the pixels."""
    attrs = group.attrs
    version = int(attrs.get("format_version", 0))
    if version != FORMAT_VERSION:
        raise ValueError(f"run format {version} is not the supported format {FORMAT_VERSION}")
    dataset = group[_MAP]
    provenance: dict[str, Any] = {}
    stored = group[_PROVENANCE].attrs
    encoded = set(json.loads(_text(stored.get(_ENCODED, "[]"))))
    for name, value in stored.items():
        if name == _ENCODED:
            continue
        if name in encoded:
            provenance[name] = json.loads(_text(value))
        else:
            provenance[name] = value.item() if isinstance(value, np.generic) else _text(value)
    values: dict[str, Any] = {name: _text(attrs[name]) for name in _TEXT_ATTRS}
    values.update({name: json.loads(_text(attrs[name])) for name in _JSON_ATTRS})
    return RunRecord(
        repeat=int(attrs["repeat"]),
        map_shape=tuple(dataset.shape),
        provenance=provenance,
        probabilities=read_map(dataset) if with_map else None,
        **values,
    )
