"""A test-set sweep from stored runs: one image at a time, maps read, summarised and dropped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.sweep import ImageSummary, SweepSummary, summarise_image
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.storage.records import RunRecord, is_merged
from segdiff_gui.storage.selection import select_run
from segdiff_gui.storage.studies import (
    RunStore,
    comparable_groups,
    group_id,
    load_study,
    settings_text,
)

__all__ = ["default_configuration", "summarise_sweep", "sweep_groups", "sweep_reference"]


def _version(record: RunRecord) -> str:
    """The model file and its settings: a sweep's images must all share them."""
    return canonical_json([record.model_hash, record.preprocessing, record.output])


def sweep_groups(
    records: Sequence[RunRecord], model: str | None = None, group: str | None = None
) -> list[list[RunRecord]]:
    """The runs of one model, one comparable group per image, in image-name order. ``group``
    (a group id) picks the model file and settings that group was run with, on every image."""
    groups = comparable_groups(records, model=model)
    if group is not None:
        chosen = {_version(g[0]) for g in comparable_groups(records, model=model, group=group)}
        groups = [g for g in groups if _version(g[0]) in chosen]
    models = {g[0].model_name for g in groups}
    if len(models) > 1:
        names = ", ".join(sorted(models))
        raise InputError(
            "model", f"the runs cover {len(models)} models ({names}); name one", fix="model"
        )
    # One model name may hide several versions (retrained file, other preprocessing or
    # output): a test-set mean over a mixture would count every image twice.
    versions = {_version(g[0]): g[0] for g in groups}
    if len(versions) > 1:
        listed = "; ".join(
            f"group {group_id(r)} ({r.target_name}): model {r.model_hash[:8]}, "
            f"{settings_text(r) or 'defaults'}"
            for r in versions.values()
        )
        raise InputError(
            groups[0][0].model_name,
            f"was run in {len(versions)} versions (model file, preprocessing or output "
            f"differ: {listed}); choose one by the group of any of its images",
            fix="group",
        )
    return sorted(groups, key=lambda g: (g[0].target_name, g[0].target_hash))


def _reference_run(records: Sequence[RunRecord], configuration: str) -> RunRecord | None:
    matches = [r for r in records if r.configuration == configuration]
    return min(matches, key=lambda r: r.repeat) if matches else None


def default_configuration(records: Sequence[RunRecord]) -> str:
    """The configuration a sweep is measured against: this machine's run with every knob at
    its default (batch 1 on the CPU), else the first configuration."""
    plain = RunConfig()
    local = [r for r in records if not is_merged(r)] or list(records)
    chosen = next((r for r in local if r.run_config == plain), local[0])
    return chosen.configuration


def sweep_reference(groups: Sequence[Sequence[RunRecord]], name: str) -> str:
    """The configuration a sweep's ``--ref`` (or ``ref=``) names: a configuration's label
    (``cpu b8``, on every image), a run's label (``cpu b8 r0``: its configuration), or an id
    prefix. Every image has the same labels, so a label is never ambiguous here."""
    everything = [record for members in groups for record in members]
    if any(record.configuration == name for record in everything):
        return name
    by_label = {record.configuration for record in everything if record.label == name}
    if len(by_label) == 1:
        return by_label.pop()
    return select_run(everything, name).configuration


def summarise_sweep(
    store: RunStore,
    groups: Sequence[Sequence[RunRecord]],
    cutoff: float,
    reference: str | None = None,
    truth: TruthFolder | None = None,
    on_image: Callable[[ImageSummary], None] | None = None,
    damaged: list[InputError] | None = None,
) -> SweepSummary:
    """Every image's runs against the ``reference`` configuration (default: ``cpu b1``, else
    the first configuration) and against its ground truth. With a ``damaged`` list, a run
    whose map cannot be read is left out and its error added there (an image whose reference
    run it was is left out, as one without a reference run); without one, it raises."""
    if not groups:
        raise InputError("sweep", "no runs to summarise")
    if reference is None:
        reference = default_configuration(groups[0])
    summary: SweepSummary | None = None
    without_reference = []
    for group in groups:
        chosen = _reference_run(group, reference)
        if chosen is None:  # an interrupted or partly failed sweep: say so, go on
            without_reference.append(group[0].target_name)
            continue
        try:
            study = load_study(store, group, cutoff, chosen, damaged)
        except InputError as error:  # none of the image's maps could be read
            if damaged is None:
                raise
            damaged.append(error)
            study = None
        if study is None or study.reference.key != chosen.key:  # its reference is unreadable
            without_reference.append(group[0].target_name)
            continue
        if summary is None:
            summary = SweepSummary(reference, cutoff, study.multiclass, group[0].model_name)
        shape = study.reference.probabilities.shape
        classes = shape[2] if study.multiclass else 2
        labels = truth.read(group[0].target_name, shape[:2], classes) if truth else None
        image = summarise_image(group[0].target_name, study, labels)
        summary.add(image)
        if on_image is not None:
            on_image(image)
        del study  # the maps of one image at a time
    if summary is None:
        known = sorted({r.configuration for g in groups for r in g})
        raise InputError(reference, f"has no run on any image (configurations: {', '.join(known)})")
    summary.without_reference = without_reference
    if truth is not None and not summary.has_truth:
        raise InputError(truth.folder, "holds no mask whose name matches an image of the sweep")
    return summary
