"""The study's questions that measure more than its maps: an explanation between two of its
runs, or between two ``key=value`` specs, and the test-set sweep. Specs and a sweep run what
is missing first, through the study's own run request; a study opened from a cache or a
bundle has no request: it sums what is stored."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from segdiff_gui.api.arguments import configuration
from segdiff_gui.api.compute import claim_cache, compute, follow_with_bar
from segdiff_gui.api.hints import with_argument
from segdiff_gui.api.results import Explanation, Sweep
from segdiff_gui.api.stored import RunName, StoredGroup
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.runner.explain import (
    AttributionSession,
    compared_runs,
    measure_between,
    measured_on,
)
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.runner.sweeps import SweepSession
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore

__all__ = ["explanation_of_runs", "explanation_of_specs", "test_set"]


def explanation_of_runs(
    group: StoredGroup,
    study: GroupAnalysis,
    first: RunName | None,
    second: RunName | None,
    title: str,
) -> Explanation:
    """What moves run ``first`` to run ``second`` of ``group`` (``study``, its analysis),
    measured from the maps already read; by default its reference and the run that differs
    most."""
    cutoff = study.cutoff
    one = group.select(first) if first is not None else group.record(study.reference.key)
    if second is not None:
        other = group.select(second)
    elif study.others:
        other = group.record(max(study.others, key=lambda run: _size(study, run)).key)
    else:
        raise InputError(title, "has only one run: nothing to explain")
    read = {run.key: run.probabilities for run in study.runs}
    attribution = measure_between(group.store, group.records, one, other, cutoff, read)
    return Explanation(attribution, title, compared_runs(one, other), measured_on(group.records))


def _size(study: GroupAnalysis, run: StudyRun) -> tuple[int, int, float]:
    comparison = study.comparisons[run.key]
    return (comparison.flips, comparison.max_ulp, comparison.max_abs)


def explanation_of_specs(
    request: MatrixRequest | None,
    store: RunStore,
    specs: tuple[str, str],
    *,
    cutoff: float,
    progress: bool,
    where: str,
    title: str,
) -> Explanation:
    """What moves spec ``first`` to spec ``second``: the configurations it needs are run
    first through ``request`` (a study opened from a store has none)."""
    if request is None:
        raise InputError(
            where,
            "holds stored runs only: run key=value specs on a study made by "
            "segdiff_gui.run(model, images), or name two of its runs",
        )
    first, second = (configuration(spec, request.model) for spec in specs[:2])
    session = AttributionSession(request, first, second, cutoff)
    records, outcome = compute(session.request, progress, what="attribution")
    attribution = session.measure(store, records)
    return Explanation(attribution, title, "", measured_on(records), outcome.failed)


def test_set(
    store: RunStore,
    stored: Sequence[RunRecord],
    *,
    group: str | None,
    request: MatrixRequest | None,
    masks: str | Path | None,
    cutoff: float,
    ref: str | None,
    progress: bool,
) -> Sweep:
    """The sweep of the model version of ``group`` over every image: computed through
    ``request`` where there is one, else from the ``stored`` runs."""
    if ref is not None and not isinstance(ref, str):
        raise InputError(repr(ref), "is no configuration: give its label, e.g. 'cpu b1'")
    try:
        session = SweepSession(
            store,
            cutoff=cutoff,
            runs=stored,
            request=request,
            reference=ref,
            masks=masks,
            group=group,
            leave_out_damaged=True,
        )
        if request is not None:
            claim_cache(request)
        result = session.run(lambda runner: follow_with_bar(runner, progress, "test set"))
        summary = result.summarised()
    except InputError as error:
        raise with_argument(error) from None
    return Sweep(summary, result.failed, [str(error) for error in result.damaged])
