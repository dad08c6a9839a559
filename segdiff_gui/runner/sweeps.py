"""A test-set sweep from stored runs: one image at a time, maps read, summarised and dropped."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json
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
    # One model name may hide several versions (retrained file, other preprocessing or
    # output): a test-set mean over a mixture would count every image twice.
    versions = {
        canonical_json([g[0].model_hash, g[0].preprocessing, g[0].output]): g[0] for g in groups
    }
    if len(versions) > 1:
        listed = ", ".join(sorted(r.model_hash[:8] for r in versions.values()))
        raise InputError(
            "--model",
            f"{groups[0][0].model_name} was run in {len(versions)} versions (model file, "
            f"preprocessing or output differ; model ids {listed}); name one by id",
        )
    return sorted(groups, key=lambda group: (group[0].target_name, group[0].target_hash))


def _reference_run(records: Sequence[RunRecord], configuration: str) -> RunRecord | None:
    matches = [r for r in records if StudyRun.configuration_of(r.label) == configuration]
    return min(matches, key=lambda r: r.repeat) if matches else None


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
    without_reference = []
    for group in groups:
        chosen = _reference_run(group, reference)
        if chosen is None:  # an interrupted or partly failed sweep: say so, go on
            without_reference.append(group[0].target_name)
            continue
        study = load_study(store, group, cutoff, chosen)
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
        known = sorted({StudyRun.configuration_of(r.label) for g in groups for r in g})
        raise InputError(reference, f"has no run on any image (configurations: {', '.join(known)})")
    summary.without_reference = without_reference
    if truth is not None and not summary.has_truth:
        raise InputError(truth.folder, "holds no mask whose name matches an image of the sweep")
    return summary
