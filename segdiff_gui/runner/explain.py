"""Attribution: which configurations explaining two of them needs (``AttributionSession``, the
one workflow the CLI's ``explain`` and the API's ``Study.explain`` of two specs drive), and
the measurement itself, from stored runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from segdiff_gui.core.attribution import Attribution, AttributionPlan, attribute, plan_attribution
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore

__all__ = [
    "AttributionSession",
    "compared_runs",
    "measure_attribution",
    "measure_between",
    "measured_on",
]


def _host(record: RunRecord) -> str | None:
    return record.provenance.hostname


def measure_attribution(
    store: RunStore,
    records: Sequence[RunRecord],
    plan: AttributionPlan,
    cutoff: float,
    ends: Sequence[str] = (),
    read: Mapping[str, np.ndarray] | None = None,
) -> Attribution:
    """Measure ``plan`` on ``records`` (one comparable group: same model, image, preprocessing).
    The maps of ``read`` (by key: a group's analysis has read them) are not read again.

    ``ends`` are the keys of the two runs a person named: they stand for their configurations,
    the total compares exactly them, and only runs computed on the first one's machine fill in
    the other configurations (a run from another host differs by more than its knobs). A
    configuration without runs is reported as not measured.
    """
    named = {record.key: record for record in records if record.key in ends}
    host = _host(named[ends[0]]) if ends and ends[0] in named else None
    by_config: dict[RunConfig, list[RunRecord]] = {}
    for record in records:
        elsewhere = host is not None and _host(record) != host
        kept_beside = record.provenance.merged_from_key is not None
        # An artefact's run beside its Keras source is another model than its configuration
        # says (its runtime is the source's conversion's too): an end only, never a step.
        artefact = record.provenance.source is not None
        if elsewhere or ((kept_beside or artefact) and record.key not in named):
            continue  # another machine's run is no repeat and no knob (but may be an end)
        if record.run_config.is_exact:
            continue  # the exact reference's float64 map: never measured as a float32 run
        by_config.setdefault(record.run_config, []).append(record)
    loaded: dict[str, np.ndarray] = dict(read or {})

    def map_of(key: str) -> np.ndarray:
        if key not in loaded:
            probabilities = store.read_run(key).probabilities
            assert probabilities is not None
            loaded[key] = probabilities
        return loaded[key]

    def maps_of(config: RunConfig) -> list[np.ndarray]:
        runs = sorted(by_config.get(config, []), key=lambda r: (r.key not in ends, r.repeat))
        return [map_of(r.key) for r in runs]

    chosen = (map_of(ends[0]), map_of(ends[1])) if len(named) == 2 else None
    return attribute(plan, maps_of, cutoff, chosen)


def measure_between(
    store: RunStore,
    records: Sequence[RunRecord],
    first: RunRecord,
    second: RunRecord,
    cutoff: float,
    read: Mapping[str, np.ndarray] | None = None,
) -> Attribution:
    """What moves stored run ``first`` to ``second`` (two runs of ``records``, their group):
    their knobs one by one, and the total between exactly these two runs (the maps of
    ``read`` not read again)."""
    plan = plan_attribution(first.run_config, second.run_config)
    if first.provenance.source is not None or second.provenance.source is not None:
        # An artefact's run beside its Keras source: its runtime step is the other model.
        steps = tuple(
            replace(step, change=f"{_model_under(first)} → {_model_under(second)}")
            if step.knob == "runtime"
            else step
            for step in plan.steps
        )
        plan = replace(plan, steps=steps)
    return measure_attribution(store, records, plan, cutoff, (first.key, second.key), read)


def measured_on(records: Sequence[RunRecord]) -> dict[str, Any]:
    """What ``segdiff explain --json`` adds to an attribution: model, image and runs."""
    return {
        "model": records[0].study_model_name,
        "image": records[0].target_name,
        "runs": {record.label: record.key for record in records},
    }


def _model_under(record: RunRecord) -> str:
    """``int8.tflite under LiteRT``: a run's model file and its runtime's family."""
    return f"{record.model_name} under {RUNTIMES[record.run_config.runtime].family}"


def compared_runs(first: RunRecord, second: RunRecord) -> str:
    """``"label (id) against label (id)"``; each run's host is named where the two differ."""
    hosts = [str(_host(record) or "?") for record in (first, second)]
    where = [f" on {host}" if hosts[0] != hosts[1] else "" for host in hosts]
    return (
        f"{first.label} ({first.short_id}{where[0]}) against "
        f"{second.label} ({second.short_id}{where[1]})"
    )


class AttributionSession:
    """What moves configuration ``first`` to ``second`` of ``request``'s model and images:
    the runs it needs (:attr:`request`, which the front end drives as it drives any matrix),
    then each knob's part, measured from those that finished (:meth:`measure`)."""

    def __init__(
        self, request: MatrixRequest, first: RunConfig, second: RunConfig, cutoff: float
    ) -> None:
        if exact := next((config for config in (first, second) if config.is_exact), None):
            raise InputError(
                "explain",
                f"{exact.label()} is the exact reference (float64): it is compared beside the "
                "reference as every run's error against it, not explained knob by knob "
                "among float32 runs",
            )
        self.plan = plan_attribution(first, second)
        if not self.plan.steps:
            raise InputError(
                "explain", f"the two configurations are one ({self.plan.base.label()})"
            )
        # Every step or none: a knob the model cannot take refuses the attribution. Knob by
        # knob of the request's model alone: an artefact's source does not run beside.
        self.request = replace(request.with_configs(self.plan.configs()), strict=True, source=None)
        self.cutoff = cutoff

    def measure(self, store: RunStore, records: Sequence[RunRecord]) -> Attribution:
        """The attribution from ``records``, the request's runs that finished."""
        if not records:
            raise InputError(self.request.model, "no run of the attribution finished")
        return measure_attribution(store, records, self.plan, self.cutoff)
