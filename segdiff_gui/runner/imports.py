"""Maps from the user's own pipeline, brought into the cache (``segdiff import``, File › Import
maps…, ``segdiff_gui.import_maps``): each is checked against the map the model gives, stored as
a run of its model and image marked imported, and compared like any run from then on.

An imported run holds what the user stated (a label, notes, the file it came from), shown as
stated, never as measured. Its key is made from its model, image, model settings and the
SHA-256 of its float32 values, so the same map imported twice is one entry; it is never a
repeat of another run and never the default reference (core/study.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.config import ModelSettings, RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import (
    canonical_json,
    hash_model,
    imported_map_digest,
    run_key,
)
from segdiff_gui.core.job import ImageRef
from segdiff_gui.core.limits import MAX_TEXT_BYTES, over_text_bound
from segdiff_gui.core.protocol import ChildFatal, ModelAnswer
from segdiff_gui.core.text import printable
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.io.image_memory import check_images_fit
from segdiff_gui.io.images import read_image
from segdiff_gui.io.maps import MapFile, UserMap, fit_to_map_shape, maps_in, open_maps
from segdiff_gui.runner.devices import inspect_model, remembered_inspection
from segdiff_gui.runner.plan import check_model_path, image_refs
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord, check_readable_back
from segdiff_gui.version import __version__

__all__ = ["ImportRequest", "Imported", "import_maps", "map_shape_of"]

_MAX_NOTES = 64


@dataclass(frozen=True)
class ImportRequest:
    """Maps of ``model`` on ``images`` (in the order of a batch's maps, or matched to an
    ``.npz``'s member names), made with ``settings``, into ``cache``."""

    maps: Path
    model: Path
    images: tuple[Path, ...]
    cache: ResultCache
    settings: ModelSettings = ModelSettings()
    label: str = ""
    notes: tuple[tuple[str, str], ...] = ()
    # The image a file of one map is of, among several (the window's image on show).
    target: int | None = None


@dataclass(frozen=True)
class Imported:
    """One map stored: its run (read back as the cache has it) and whether it was new."""

    record: RunRecord
    added: bool
    rounded: bool  # a float64 map, rounded to float32


Inspect = Callable[..., ModelAnswer | ChildFatal]


def map_shape_of(
    answer: ModelAnswer, settings: ModelSettings, image: np.ndarray, model: Path
) -> tuple[int, ...]:
    """The map the model gives for ``image``: H×W for one channel, H×W×C for several; a free
    height or width is the image's."""
    index = settings.output.index_in([str(o["name"]) for o in answer.outputs], model)
    shape = list(answer.outputs[index]["shape"])
    if len(shape) != 4:
        raise InputError(model, f"output has shape {shape}; segdiff needs a per-pixel map")
    height = shape[1] or int(image.shape[0])
    width = shape[2] or int(image.shape[1])
    channels = shape[3] or 1
    return (height, width) if channels == 1 else (height, width, channels)


def _pairs(
    maps: MapFile,
    refs: Sequence[ImageRef],
    expected: tuple[int, ...],
    target: int | None,
) -> list[tuple[ImageRef, np.ndarray, UserMap]]:
    """Each map with its image: an ``.npz``'s members by the images' names (or stems), else
    in order; a batch's maps in the images' order; one map, the ``target``'s where given.
    Every array's shape is checked from its header, and the maps counted against the images,
    before a byte of their values is read: a file of a few megabytes may declare gigabytes."""
    by_name = {}
    for ref in refs:
        by_name[ref.name] = by_name[Path(ref.name).stem] = ref
    declared = maps.declared
    named = len(declared) > 1 and all(m.name in by_name for m in declared)
    counts = [maps_in(maps.label(i), item.shape, expected) for i, item in enumerate(declared)]
    if named:
        for index, count in enumerate(counts):
            if count != 1:
                raise InputError(
                    maps.label(index), "is a batch; an .npz member named after an image is one map"
                )
    elif sum(counts) != len(refs) and not (target is not None and sum(counts) == 1):
        names = ", ".join(ref.name for ref in refs[:5])
        raise InputError(
            maps.where,
            f"holds {sum(counts)} map(s) but {len(refs)} image(s) were given ({names}); give "
            "the images in the order of the maps",
        )
    pairs = []
    flat: list[tuple[np.ndarray, UserMap]] = []
    for index, item in enumerate(declared):
        user_map = maps.read(index)
        fitted = fit_to_map_shape(maps.label(index), user_map.values, expected)
        if named:
            pairs.append((by_name[item.name], fitted[0], user_map))
        else:
            flat += [(values, user_map) for values in fitted]
    if named:
        return pairs
    if target is not None and len(flat) == 1:
        return [(refs[target], *flat[0])]
    return [(ref, values, user_map) for ref, (values, user_map) in zip(refs, flat, strict=True)]


def _notes(notes: Sequence[tuple[str, str]]) -> dict[str, str]:
    if len(notes) > _MAX_NOTES:
        raise InputError("--note", f"{len(notes)} notes, over {_MAX_NOTES}")
    checked = {}
    for key, value in notes:
        if not key or len(key.encode()) + len(value.encode()) > MAX_TEXT_BYTES // _MAX_NOTES:
            raise InputError("--note", f"{printable(key)[:40]!r} is not a short KEY=VALUE")
        checked[printable(key)] = printable(value)
    return checked


def _stated(request: ImportRequest) -> tuple[str, dict[str, str]]:
    """The label and notes as the runs will state them, bounded at the front door by the
    bound their reader applies (measured as stored: JSON writes each character past ASCII
    as six), before anything is read or asked."""
    notes = _notes(request.notes)
    label = printable(request.label.strip()) or request.maps.stem
    stored = canonical_json({"label": label, "notes": notes})
    if over_text_bound(stored):
        raise InputError(
            request.maps,
            f"what is stated of it (its label and notes) is {len(stored):,} characters as "
            f"stored, over segdiff's bound of {MAX_TEXT_BYTES:,} for one attribute; state less",
        )
    return label, notes


def _answer(
    request: ImportRequest, inspect: Inspect, model: Path, model_hash: str, fresh: bool = False
) -> ModelAnswer:
    answer = inspect(
        model, request.settings.trust_model, state_dir=request.cache.root,
        model_hash=model_hash, fresh=fresh,
    )  # fmt: skip
    if isinstance(answer, ChildFatal):
        raise InputError(answer.path, answer.problem, answer.fix)
    return answer


def import_maps(request: ImportRequest, inspect: Inspect = inspect_model) -> list[Imported]:
    """Check and store every map of ``request``; nothing is stored unless all are fine."""
    model = check_model_path(request.model)
    if not request.images:
        raise InputError(request.maps, "no image given: name the image(s) the map was made of")
    label, notes = _stated(request)
    maps = open_maps(request.maps)  # its headers: its values once their shapes are checked
    request.cache.claim()
    model_hash = hash_model(model)
    refs = image_refs(list(request.images))
    check_images_fit([Path(ref.path)] for ref in refs)  # each decoded alone, header first
    first = read_image(refs[request.target or 0].path)
    settings, trust = request.settings, request.settings.trust_model
    remembered = remembered_inspection(request.cache.root, model, model_hash, trust) is not None
    answer = _answer(request, inspect, model, model_hash)
    try:
        pairs = _pairs(maps, refs, map_shape_of(answer, settings, first, model), request.target)
    except InputError:
        if not remembered:
            raise
        # What the cache remembered of the model is a hint, not a fact: maps that disagree
        # with it are checked against what the model says now before they are refused.
        again = _answer(request, inspect, model, model_hash, fresh=True)
        if again == answer:
            raise
        pairs = _pairs(maps, refs, map_shape_of(again, settings, first, model), request.target)
    records = []
    for ref, values, user_map in pairs:
        records.append(
            _record(
                request,
                model=model,
                model_hash=model_hash,
                ref=ref,
                values=values,
                user_map=user_map,
                label=label,
                notes=notes,
                count=len(pairs),
            )  # fmt: skip
        )
    for record in records:  # every one storable and readable back, before any is stored
        check_readable_back(record, request.maps)
    if any(not request.cache.has(record.key) for record in records):
        request.cache.check_writable()  # a read-only cache is the cache's one line
    done = []
    for (ref, _, user_map), record in zip(pairs, records, strict=True):
        if not request.cache.has_image(ref.hash):
            request.cache.write_image(ref.hash, ref.name, read_image(ref.path))
        added = not request.cache.has(record.key)
        if added:
            request.cache.write_run(record)
        stored = request.cache.read_run(record.key, with_map=False)
        rounded = user_map.source_dtype == "float64"
        done.append(Imported(stored, added, rounded))
    return done


def _record(
    request: ImportRequest,
    *,
    model: Path,
    model_hash: str,
    ref: ImageRef,
    values: np.ndarray,
    user_map: UserMap,
    label: str,
    notes: dict[str, str],
    count: int,
) -> RunRecord:
    values = np.ascontiguousarray(values, dtype="<f4")
    digest = imported_map_digest(values)
    settings = request.settings
    config = RunConfig()
    key = run_key(
        model_hash=model_hash,
        target_hash=ref.hash,
        batch_hashes=[ref.hash],
        preprocessing=settings.preprocessing.to_dict(),
        output=settings.output.to_dict(),
        config=config.to_dict(),
        repeat=0,
        imported=digest,
    )
    stated: dict[str, Any] = {
        "map_sha256": digest,
        "label": label if count == 1 else f"{label} ({ref.name})"[:200],
        "file": printable(request.maps.name),
        "member": user_map.name,
        "source_dtype": user_map.source_dtype,
        "notes": notes,
    }
    kind = "sigmoid" if values.ndim == 2 else "softmax"
    channels = 1 if values.ndim == 2 else int(values.shape[2])
    return RunRecord(
        key=key,
        label="",
        config=config.to_dict(),
        repeat=0,
        model_name=model.name,
        model_hash=model_hash,
        target_name=ref.name,
        target_hash=ref.hash,
        batch_hashes=[ref.hash],
        batch_names=[ref.name],
        preprocessing=settings.preprocessing.to_dict(),
        output=settings.output.to_dict(),
        output_name="imported",
        kind=kind,
        raw_output_shape=[1, int(values.shape[0]), int(values.shape[1]), channels],
        map_shape=tuple(int(n) for n in values.shape),
        provenance=Provenance.from_dict(
            {"imported": stated, "segdiff_version": __version__, "timestamp": local_timestamp()}
        ),
        probabilities=values,
    )
