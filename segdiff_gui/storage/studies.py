"""From stored runs to studies: runs are comparable when they share the model, the target
image, the preprocessing, the output and the map shape. An artefact's runs beside its Keras
source share the source's model: its study is the source's, both models' runs in
one group."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from segdiff_gui.core.config import OutputSelection, Preprocessing
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.hashing import canonical_json, hash_bytes
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.core.text import shape_text
from segdiff_gui.storage.records import (
    RunRecord,
    batch_id,
    batch_tag,
)

__all__ = [
    "RunStore",
    "comparable_groups",
    "configuration_key",
    "distinguish_batches",
    "exact_of",
    "without_exact",
    "group_id",
    "group_of",
    "group_titles",
    "grouped",
    "models_text",
    "narrowed",
    "settings_text",
    "load_study",
    "natural_order",
    "output_names",
    "study_run",
    "target_image",
]


class RunStore(Protocol):
    """A cache or a bundle: anything that reads runs by key."""

    def read_run(self, key: str, with_map: bool = True) -> RunRecord: ...

    def read_image(self, image_hash: str) -> np.ndarray | None: ...


def target_image(store: RunStore, image_hash: str) -> tuple[np.ndarray | None, InputError | None]:
    """The target image shown under the maps (``None`` where the store has none), and why a
    stored one could not be read: it is shown, not analysed, so a damaged one is left out and
    the maps still show, and each front end says so in one line."""
    try:
        return store.read_image(image_hash), None
    except InputError as error:
        problem = f"{error.problem}; the maps are shown without the image under them"
        return None, InputError(error.path, problem)


def _group_key(record: RunRecord) -> str:
    return canonical_json(
        [
            record.study_model_hash,
            record.target_hash,
            record.preprocessing,
            record.output,
            list(record.map_shape),
        ]
    )


def group_id(record: RunRecord) -> str:
    """A short name for the record's comparable group (model, image, settings, map shape):
    what ``--group`` takes, and what ``ls`` and every group's title show."""
    return hash_bytes(_group_key(record).encode())[:6]


_SETTING_DEFAULTS = {**Preprocessing().to_dict(), **OutputSelection().to_dict()}
# Said together, as the arithmetic (or as the user's function, which replaces it).
_SCALING = ("scale", "divisor", "by_dtype", "function", "function_sha256")


def settings_text(record: RunRecord) -> str:
    """The record's model settings that are not the defaults, as the options name them:
    ``x * 0.00392157, color rgb, resize bilinear``; ``""`` when all are defaults. The scaling
    is said as its arithmetic (dividing and multiplying round differently)."""
    parts = []
    try:
        scaling = Preprocessing.from_dict(record.preprocessing).scaling_text()
    except ConfigError:  # checked when read; a record built in memory may still be odd
        scaling = ""
    if scaling and scaling != Preprocessing().scaling_text():
        parts.append(scaling)
    for name, value in (*record.preprocessing.items(), *record.output.items()):
        default = _SETTING_DEFAULTS.get(name)
        if name in _SCALING or value in (default, None) or value == []:
            continue
        shown = ",".join(f"{v:g}" for v in value) if isinstance(value, list) else value
        shown = f"{shown:.6g}" if isinstance(shown, float) else shown
        parts.append(f"{name} {shown}")
    return ", ".join(parts)


def output_names(record: RunRecord) -> tuple[str, ...]:
    """The names a group's output is known by (every run of a group is of one output): what
    ``--output`` chose (a name or an index), and the model's own name for it (an imported
    map has none)."""
    chosen = record.output.get("output")
    own = "" if record.provenance.imported is not None else record.output_name
    return tuple(dict.fromkeys(name for name in (chosen, own) if name))


def group_titles(groups: Sequence[Sequence[RunRecord]]) -> dict[str, str]:
    """Each group's title by its id: ``model.keras on cell_07.png``, with the settings when
    they are not the defaults or another group shares the model and image (two groups must
    not look alike)."""
    shared = Counter((g[0].study_model_hash, g[0].target_hash) for g in groups if g)
    titles = {}
    for group in groups:
        record = group[0]
        title = f"{models_text(group)} on {record.target_name}"
        settings = settings_text(record)
        if settings:
            title = f"{title} ({settings})"
        elif shared[(record.study_model_hash, record.target_hash)] > 1:  # other settings
            shape = shape_text(record.map_shape)
            title = f"{title} (default settings, {shape} map, group {group_id(record)})"
        titles[group_id(record)] = title
    return titles


def models_text(group: Sequence[RunRecord]) -> str:
    """The model files of a group: its model's, and any artefact's run beside it as its Keras
    source (``unet.keras with int8.tflite``)."""
    if not group:
        return ""
    source = group[0].study_model_name
    artefacts = dict.fromkeys(r.model_name for r in group if r.provenance.source is not None)
    return " with ".join([source, *artefacts]) if artefacts else source


def comparable_groups(
    records: Sequence[RunRecord],
    model: str | None = None,
    image: str | None = None,
    group: str | None = None,
) -> list[list[RunRecord]]:
    """Records split into comparable groups (in order of first appearance), optionally only
    those of the model and image named, or the one group of that id. A precision repair's
    trials (runs with layers kept in float32) are left out: dozens of them are the search's
    steps, not runs anyone set out to compare (its report says what they found). So is the
    exact reference (float64): it is a comparison of its own, beside the reference,
    never one of the float32 runs (:func:`exact_of` finds a group's). A model named (its file
    name or hash prefix) chooses the groups it has runs in: an artefact's beside its source
    are the source's group, whichever of the two is named."""
    return narrowed(grouped(records), model, image, group)


def grouped(records: Sequence[RunRecord]) -> list[list[RunRecord]]:
    """Every comparable group of ``records`` (see :func:`comparable_groups`), none left out."""
    groups: dict[str, list[RunRecord]] = {}
    for record in sorted(filter(_compared, records), key=natural_order):
        groups.setdefault(_group_key(record), []).append(record)
    return [distinguish_batches(group) for group in groups.values()]


def narrowed(
    groups: Sequence[list[RunRecord]],
    model: str | None = None,
    image: str | None = None,
    group: str | None = None,
) -> list[list[RunRecord]]:
    """Of ``groups`` (:func:`grouped`), those of the model and image named, or the one group
    of that id; a name that matches none is refused (see :func:`comparable_groups`)."""
    found = [
        members
        for members in groups
        if (image is None or image in (members[0].target_name, members[0].target_hash[:8]))
        and (group is None or group_id(members[0]).startswith(group.lower()))
        and (model is None or any(_named(r, model) for r in members))
    ]
    if not found and (model or image or group):
        raise InputError(model or image or group, "matches no run in the cache (see 'segdiff ls')")
    return found


def _named(record: RunRecord, model: str) -> bool:
    """Whether ``model`` names the record's model, or the Keras source it sits beside."""
    names = (record.model_name, record.model_hash[:8])
    source = record.provenance.source
    return model in names or (source is not None and model in (source.name, source.sha256[:8]))


def _compared(record: RunRecord) -> bool:
    """Whether a run is one of its group's compared runs: not a repair's trial, not the
    exact reference."""
    config = record.run_config
    return not config.keep_float32 and not config.is_exact


def distinguish_batches(records: Sequence[RunRecord]) -> list[RunRecord]:
    """``records`` with the batch named in the label of every run whose configuration was
    also run with another batch (images of another set, another order): ``cpu b64 6img#a3f2
    r0``. Such runs are no repeats of one another (:attr:`StudyRun.identity`), and must not
    look alike; every other label stays short."""
    batches: dict[str, set[str]] = {}
    for record in records:
        batches.setdefault(configuration_key(record), set()).add(batch_id(record))
    distinguished = []
    for record in records:
        if len(batches[configuration_key(record)]) > 1:
            label = f"{record.label.removesuffix(f' r{record.repeat}')} {batch_tag(record)}"
            record = replace(record, label=f"{label} r{record.repeat}")
        distinguished.append(record)
    return distinguished


def configuration_key(record: RunRecord) -> str:
    """A configuration as a repeat of it is one: its label (with its host and calibration)."""
    return canonical_json([record.configuration, record.provenance.hostname or ""])


def natural_order(record: RunRecord) -> tuple[object, ...]:
    """Device, then batch, then the other knobs, then the repeat: how people read a matrix."""
    config = record.run_config
    return (config.device, config.batch, config.label(), record.repeat)


def group_of(records: Sequence[RunRecord], member: RunRecord) -> list[RunRecord]:
    """The runs comparable with ``member``, the exact reference left out (see
    :func:`comparable_groups`)."""
    key = _group_key(member)
    return distinguish_batches(
        sorted((r for r in without_exact(records) if _group_key(r) == key), key=natural_order)
    )


def without_exact(records: Sequence[RunRecord]) -> list[RunRecord]:
    """``records`` less the exact reference (float64): the runs a
    :class:`~segdiff_gui.core.study.GroupAnalysis` compares, all float32."""
    return [record for record in records if not record.run_config.is_exact]


def exact_of(records: Sequence[RunRecord], member: RunRecord) -> RunRecord | None:
    """The exact reference of ``member``'s group (its float64 run of the same model, image,
    settings and map shape), or ``None``. Any batch and repeat computes the same
    map within float64's rounding; the first in natural order is taken."""
    key = _group_key(member)
    exact = [r for r in records if r.run_config.is_exact and _group_key(r) == key]
    return min(exact, key=natural_order, default=None)


def study_run(record: RunRecord, probabilities: np.ndarray) -> StudyRun:
    """A stored run as the analysis sees it."""
    provenance = record.provenance
    merged_from = (provenance.merged_from_bundle or "a bundle") if provenance.merged else ""
    imported = provenance.imported_digest
    # An artefact's run beside its source is another model than its configuration says.
    artefact = f"{record.model_name}#{record.model_hash[:8]}" if provenance.source else ""
    return StudyRun(
        record.key,
        record.label,
        record.run_config,
        record.repeat,
        probabilities,
        machine=provenance.hostname or "",
        merged_from=merged_from,
        variant=f"imported#{imported}" if imported else artefact or provenance.calibration_tag,
        batch=batch_id(record),
        imported=bool(imported),
        onednn=provenance.onednn_enabled,
        artefact=record.model_name if provenance.source else "",
    )


def load_study(
    store: RunStore,
    records: Sequence[RunRecord],
    cutoff: float,
    reference: RunRecord | None = None,
    damaged: list[InputError] | None = None,
    exact: RunRecord | None = None,
) -> GroupAnalysis:
    """The maps of ``records`` (one comparable group) as a :class:`GroupAnalysis`; records
    read without their map are read again with it. With a ``damaged`` list, a run whose map
    cannot be read (a damaged chunk, a checksum that does not match) is left out and its error
    added there; a group with none left raises the last one's. The exact reference (float64)
    is left out: it is compared beside the reference, never among the float32 runs; ``exact``
    (the group's,
    :func:`exact_of`) is read and kept as the study's ``exact`` (one that cannot be read is
    left out like any run, its error added to ``damaged``)."""
    compared = without_exact(records)
    if records and not compared:
        raise InputError(
            records[0].label,
            "is the exact reference (float64): it is compared beside a float32 run, and "
            "there is none of this model and image to compare",
        )
    runs = [run for record in compared if (run := _read(store, record, damaged))]
    if not runs:
        assert damaged
        raise damaged.pop()
    chosen = next((run for run in runs if reference and run.key == reference.key), None)
    return GroupAnalysis(
        runs, cutoff, chosen, exact=_read(store, exact, damaged) if exact else None
    )


def _read(store: RunStore, record: RunRecord, damaged: list[InputError] | None) -> StudyRun | None:
    """``record`` with its map as the analysis sees it; with ``damaged``, None (and its error
    added there) where the map cannot be read, else that error raised."""
    try:
        full = record if record.probabilities is not None else store.read_run(record.key)
    except InputError as error:
        if damaged is None:
            raise
        damaged.append(error)
        return None
    assert full.probabilities is not None
    return study_run(record, full.probabilities)
