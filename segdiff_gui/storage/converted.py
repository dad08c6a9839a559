"""Converted models in the cache: ``converted/<kk>/<key>.h5``, one per model,
runtime, converter version and conversion options (and, for full int8, calibration images).

A file holds the artefact's bytes (a ``.tflite`` flatbuffer or an ``.onnx`` protobuf) as one
contiguous uint8 dataset, its SHA-256, what it was made from (the key's ingredients: the
model's hash, the runtime, the converters …) and what the conversion recorded (converter
versions, options, size, time, warnings). Written in memory and renamed into place like a run;
read as untrusted data: a plain file, a hard-linked dataset without filters, bounded in size,
its key recomputed from its recorded ingredients (another model's artefact copied to this
key is refused), and the bytes must match their digest before a runtime parses them. A
damaged entry is converted again (it is derived data), never an error for the run. A model
runs as its artefact says, so artefacts are held to the compilation cache's rule
(``locations.ownership_problem``): where the entry or a folder up to the cache's root is
another user's or writable by others, nothing is read or kept there (:meth:`refused`).

Artefacts never travel in bundles: a bundle carries maps, and a converted model is made again
from the model wherever it is needed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.hashing import canonical_json, hash_bytes
from segdiff_gui.storage.cache import checked_digest, in_memory_h5, open_h5_for_reading
from segdiff_gui.storage.hdf5_access import UnreadableEntry, h5py_damage, plain_dataset
from segdiff_gui.storage.locations import ownership_problem
from segdiff_gui.storage.schema import AttributeReader

__all__ = ["MAX_ARTEFACT_BYTES", "ConvertedModel", "ConvertedStore", "conversion_key"]

FORMAT = "segdiff-converted-model"
VERSION = 2  # 2: the key's ingredients are stored and checked
# Larger than any model this tool is for (a segmentation network of a few hundred MB), small
# enough that a crafted header cannot make segdiff allocate the disk.
MAX_ARTEFACT_BYTES = 4 << 30


def conversion_key(ingredients: dict[str, Any]) -> str:
    """The key of one conversion: what it was made from and how (see engine/conversion.py)."""
    return hash_bytes(
        canonical_json({"format": FORMAT, "version": VERSION, **ingredients}).encode()
    )


@dataclass(frozen=True)
class ConvertedModel:
    ingredients: dict[str, Any]  # what it was made from, and how: its key's
    data: bytes
    facts: dict[str, Any]  # converter versions, options, size, time, warnings …

    @property
    def key(self) -> str:
        return conversion_key(self.ingredients)


class ConvertedStore:
    """The ``converted`` part of a cache."""

    def __init__(self, cache_root: str | Path) -> None:
        self.cache_root = Path(cache_root)
        self.root = self.cache_root / "converted"

    def path(self, key: str) -> Path:
        checked_digest(key, "conversion key")
        return self.root / key[:2] / f"{key}.h5"

    def refused(self, key: str = "") -> str:
        """Why the artefact of ``key`` must be neither read nor kept here ("" when it may):
        it, or a folder up to the cache's root, is another user's or can be written by others,
        who could plant a model that computes something else. Without a key: the first such
        folder of the store (its own and each of its 256 at most)."""
        if key:
            return ownership_problem(self.path(key), self.cache_root, self.cache_root)
        folders = (self.root / f"{index:02x}" for index in range(256))  # where keys go
        for path in (self.root, *folders):
            if problem := ownership_problem(path, self.cache_root, self.cache_root):
                return problem
        return ""

    def write(self, converted: ConvertedModel) -> None:
        with in_memory_h5(self.path(converted.key)) as handle:
            handle.attrs["format"], handle.attrs["version"] = FORMAT, VERSION
            handle.attrs["sha256"] = hashlib.sha256(converted.data).hexdigest()
            handle.attrs["ingredients"] = canonical_json(converted.ingredients)
            handle.attrs["facts"] = canonical_json(converted.facts)
            handle.create_dataset("artefact", data=np.frombuffer(converted.data, dtype=np.uint8))

    def read(self, key: str) -> ConvertedModel | None:
        """The stored conversion; None if there is none; UnreadableEntry if it is damaged."""
        path = self.path(key)
        if not os.path.lexists(path):
            return None
        where = str(path)
        with open_h5_for_reading(path, follow_symlinks=False) as handle:
            attrs = AttributeReader(handle, where, "converted model")
            if attrs.text("format") != FORMAT or attrs.integer("version", 0, 99) != VERSION:
                raise UnreadableEntry(path, "is not a converted model of this segdiff version")
            digest = attrs.digest("sha256")
            ingredients = attrs.json("ingredients")
            if not isinstance(ingredients, dict) or conversion_key(ingredients) != key:
                raise UnreadableEntry(path, "holds another conversion than its name says")
            facts = attrs.json("facts")
            if not isinstance(facts, dict):
                raise UnreadableEntry(path, "holds conversion facts segdiff did not write")
            dataset = plain_dataset(handle, "artefact", where)
            with h5py_damage(dataset, where, "/artefact"):
                if (
                    dataset.dtype != np.uint8
                    or dataset.ndim != 1
                    or dataset.chunks is not None  # contiguous: no filter can inflate it
                    or not 0 < dataset.shape[0] <= MAX_ARTEFACT_BYTES
                ):
                    raise UnreadableEntry(path, "holds an artefact segdiff did not write")
                data = dataset[()].tobytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise UnreadableEntry(path, "artefact does not match its checksum")
        return ConvertedModel(ingredients, data, facts)

    def remove(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)
