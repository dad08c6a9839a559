"""A test-set sweep from stored runs: one image at a time, maps read, summarised and dropped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import StudyRun
from segdiff_gui.core.sweep import ImageSummary, SweepSummary, summarise_image
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, comparable_groups, load_study

__all__ = ["summarise_sweep", "sweep_groups"]


def sweep_groups(records: Sequence[RunRecord], model: str | None = None) -> list[list[RunRecord]]:
    """The runs of one model, one comparable group per image, in image-name order."""
    groups = comparable_groups(records, model=model)
    models = {group[0].model_name for group in groups}
    if len(models) > 1:
        names = ", ".join(sorted(models))
        raise InputError("--model", f"the runs cover {len(models)} models ({names}); name one")
    return sorted(groups, key=lambda group: (group[0].target_name, group[0].target_hash))


def _reference_key(records: Sequence[RunRecord], configuration: str) -> RunRecord:
    matches = [r for r in records if StudyRun.configuration_of(r.label) == configuration]
    if not matches:
        record = records[0]
        known = ", ".join(sorted({StudyRun.configuration_of(r.label) for r in records}))
        raise InputError(
            configuration,
            f"has no run on {record.target_name} of {record.model_name} (its configurations: "
            f"{known})",
        )
    return min(matches, key=lambda r: r.repeat)


def summarise_sweep(
    store: RunStore,
    groups: Sequence[Sequence[RunRecord]],
    cutoff: float,
    reference: str | None = None,
    truth: TruthFolder | None = None,
    on_image: Callable[[ImageSummary], None] | None = None,
) -> SweepSummary:
    """Every image's runs against the ``reference`` configuration (default: ``cpu b1``, else
    the first configuration) and against its ground truth."""
    if not groups:
        raise InputError("sweep", "no runs to summarise")
    if reference is None:
        configurations = {StudyRun.configuration_of(r.label) for r in groups[0]}
        reference = (
            "cpu b1"
            if "cpu b1" in configurations
            else StudyRun.configuration_of(groups[0][0].label)
        )
    summary: SweepSummary | None = None
    for group in groups:
        study = load_study(store, group, cutoff, _reference_key(group, reference))
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
    assert summary is not None
    if truth is not None and not summary.has_truth:
        raise InputError(truth.folder, "holds no mask whose name matches an image of the sweep")
    return summary
