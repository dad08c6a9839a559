"""One stored layer probe: the target's slice of every layer's output under one
configuration, float32 (low precisions widen exactly), in execution order, each layer in
pieces of rows so that reading one layer never needs more than a piece at a time; and the
probe's own final map. Written as the layers come (:class:`ProbeWriter`), read as untrusted
data (:class:`ProbeTensors`: hard links only, sizes bounded, every array checked against its
CRC-32). Where the files live and how long they stay: :mod:`segdiff_gui.storage.layers`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.layer_stats import read_quantization
from segdiff_gui.core.limits import check_stored_bytes
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.storage.cache import no_space, open_h5_for_reading
from segdiff_gui.storage.chunked_read import MAX_CHUNK_BYTES, read_stored_array
from segdiff_gui.storage.chunked_write import write_compressed
from segdiff_gui.storage.hdf5_access import UnreadableEntry, plain_dataset, plain_group
from segdiff_gui.storage.records import array_checksum
from segdiff_gui.storage.schema import AttributeReader

__all__ = [
    "ARTEFACT_MATCHING",
    "CONVERTED_MATCHING",
    "MAX_LAYERS",
    "PROBE_FORMAT",
    "VERSION",
    "LayerInfo",
    "ProbeTensors",
    "ProbeWriter",
    "piece_rows",
    "read_array",
    "matched_as_now",
    "store_array",
]

PROBE_FORMAT, VERSION = "segdiff-layer-probe", 1
# How a converted runtime's tensors are matched to the Keras layers (engine/tensor_matching.py):
# 2, whole name scopes, each layer call one scope. Before it (not recorded) the longest name,
# which could credit a layer with another layer's tensor. A converted probe matched otherwise,
# and a comparison with one, is derived data made again.
CONVERTED_MATCHING = 2
# How the user's own artefact's tensors are matched to its Keras source's layers: 1, by the
# graph (engine/graph_matching.py); a probe matched otherwise is made again, as above.
ARTEFACT_MATCHING = 1
# A comparison holds a piece of each side and a few block-sized temporaries.
_PIECES_IN_MEMORY = 8
_SPARE_BYTES = 1 << 20
MAX_LAYERS = 1 << 14


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
    # A quantized tensor's scale and zero point, as the runtime held it (an artefact's); the
    # artefact's node that computed it, as Model Explorer numbers it ("": a Keras layer).
    scale: float | None = None
    zero_point: int | None = None
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "class_name": self.class_name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "batch_shape": list(self.batch_shape),
        }
        if self.scale is not None:
            data["scale"], data["zero_point"] = self.scale, self.zero_point
        if self.node:
            data["node"] = self.node
        return data


def store_array(group: h5py.Group, name: str, values: np.ndarray) -> None:
    data = np.ascontiguousarray(values, dtype="<f4")
    if data.ndim == 0:
        data = data.reshape(1)
    dataset = write_compressed(group, name, data)
    dataset.attrs["crc32"] = array_checksum(data)


def read_array(group: h5py.Group, name: str, where: str, what: str) -> np.ndarray:
    dataset = plain_dataset(group, name, where)
    if dataset.dtype != np.dtype("<f4") or not 1 <= dataset.ndim <= 4:
        raise UnreadableEntry(where, f"{dataset.name} is not a float32 array segdiff wrote")
    check_stored_bytes(where, dataset.shape, 4, what)
    crc = AttributeReader(dataset, where, dataset.name).integer("crc32", 0, 2**32)
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
        quantization: tuple[float, int] | None = None,
        node: str = "",
    ) -> None:
        if self.count >= MAX_LAYERS:
            raise ValueError(f"more than {MAX_LAYERS:,} layer outputs")
        data = np.asarray(values, dtype=np.float32)
        needed = data.nbytes + _SPARE_BYTES
        if shutil.disk_usage(self._folder).free < needed:
            raise no_space(self._folder, needed=needed)
        group = self._layers.create_group(f"{self.count:05d}")
        scale, zero_point = quantization if quantization else (None, None)
        info = LayerInfo(
            self.count, name, class_name, dtype, data.shape, tuple(batch_shape),
            scale, zero_point, node,
        )  # fmt: skip
        group.attrs["layer"] = canonical_json(info.to_dict())
        rows = piece_rows(data.shape, self._budget)
        flat = data.reshape(1) if data.ndim == 0 else data
        pieces = range(0, flat.shape[0], rows)
        for number, start in enumerate(pieces):
            store_array(group, f"p{number:05d}", flat[start : start + rows])
        group.attrs["pieces"] = len(pieces)
        self.count += 1
        self.bytes += data.nbytes

    def finish(self, meta: dict[str, Any], final_map: np.ndarray) -> None:
        store_array(self._handle, "final_map", final_map)
        attrs = self._handle.attrs
        attrs["format"], attrs["version"] = PROBE_FORMAT, VERSION
        attrs["layer_count"] = self.count
        attrs["tensor_bytes"] = self.bytes
        attrs["meta"] = canonical_json(meta)


def matched_as_now(meta: Mapping[str, Any]) -> bool:
    """Whether a probe (its meta, or a comparison's side) has its tensors matched to its layers
    as segdiff matches them now: a Keras probe's are its layers' own outputs; a converted
    runtime's must be matched by :data:`CONVERTED_MATCHING`."""
    if meta.get("artefact"):  # the user's own artefact, matched to its source's layers
        return meta.get("matching") == ARTEFACT_MATCHING
    config = meta.get("config")
    name = config.get("runtime", "tensorflow") if isinstance(config, dict) else None
    runtime = RUNTIMES.get(name) if isinstance(name, str) else None
    converted = runtime is not None and runtime.conversion is not None
    return not converted or meta.get("matching") == CONVERTED_MATCHING


class ProbeTensors:
    """A stored probe, read layer by layer (one piece at a time) as untrusted data."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self._handle = open_h5_for_reading(path, follow_symlinks=False)
        try:
            attrs = AttributeReader(self._handle, self.where, "probe")
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
        attrs = AttributeReader(layer, self.where, layer.name)
        data = attrs.json("layer")
        try:
            quantization = read_quantization(data.get("scale"), data.get("zero_point"))
            info = LayerInfo(
                index,
                str(data["name"]),
                str(data["class_name"]),
                str(data["dtype"]),
                tuple(int(d) for d in data["shape"]),
                tuple(int(d) for d in data["batch_shape"]),
                None if quantization is None else quantization[0],
                None if quantization is None else quantization[1],
                str(data.get("node", ""))[:200],
            )
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
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
        count = AttributeReader(group, self.where, group.name).integer("pieces", 1, 2**20)
        rows = 0
        trailing = info.shape[1:] if info.shape else ()
        for number in range(count):
            piece = read_array(group, f"p{number:05d}", self.where, f"layer {info.name}")
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
        return read_array(self._handle, "final_map", self.where, "a probe's final map")
