"""A study's report, assembled once for both front ends (``segdiff report`` and the window's
File › Export report): the analysis, every run's provenance read from its store, and what the
report is about."""

from __future__ import annotations

import contextlib
from typing import Any

from segdiff_gui.core.diagnosis import diagnose
from segdiff_gui.core.repair import repair_code
from segdiff_gui.core.study import Study
from segdiff_gui.io.reports import report_data
from segdiff_gui.runner.layers import LayerProbe
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.hdf5_access import UnreadableEntry
from segdiff_gui.storage.layers import LayerStore, comparison_key, probe_key
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, group_id

__all__ = ["comparison_summary", "diagnosis_summary", "report_context", "study_report"]


def report_context(record: RunRecord, source: str = "") -> dict[str, Any]:
    """What a report (or a command's JSON) says it is about: the model, the image, the group
    and its settings, and where the runs were read."""
    context: dict[str, Any] = {
        "model": record.model_name,
        "image": record.target_name,
        "group": group_id(record),
        "settings": {"preprocessing": record.preprocessing, "output": record.output},
    }
    if source:
        context["source"] = source
    return context


def comparison_summary(study: Study, context: dict[str, Any]) -> dict[str, Any]:
    """Every run against the reference, the repeats' verdicts and the at-risk pixels: what
    ``segdiff compare --json`` prints for a group and what the API's comparison holds."""
    return {
        **context,
        "cutoff": study.cutoff,
        "reference": study.reference.label,
        "comparisons": study.rows(),
        "determinism": {name: verdict.sentence() for name, verdict in study.verdicts.items()},
        "at_risk": {"margin": study.margin, "pixels": int(study.at_risk.sum())},
    }


def diagnosis_summary(study: Study, context: dict[str, Any]) -> dict[str, Any]:
    """The diagnosis's findings: what ``segdiff diagnose --json`` prints for a group."""
    return {
        **context,
        "reference": study.reference.label,
        "cutoff": study.cutoff,
        "findings": [finding.to_dict() for finding in diagnose(study)],
    }


def study_report(store: RunStore, study: Study, context: dict[str, Any]) -> dict[str, Any]:
    """The report's data: ``study`` with the provenance of each of its runs (and the oneDNN
    it had, in words), and the layer probes and precision repairs a cache holds for pairs of
    its runs."""
    provenance = {}
    for run in study.runs:
        stored = store.read_run(run.key, with_map=False).provenance
        provenance[run.key] = {
            **stored.to_dict(),
            "onednn_in_effect": stored.onednn_in_effect(run.config),
        }
    data = report_data(study, provenance, context)
    if isinstance(store, ResultCache):
        data["layer_probes"], data["repairs"] = _layer_findings(store, study, context)
    return data


def _layer_findings(
    cache: ResultCache, study: Study, context: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every stored layer comparison and repair between two runs of ``study`` (a damaged
    entry is left out: it costs only itself)."""
    layers = LayerStore(cache)
    probes, repairs = [], []
    for reference in study.runs:
        for other in study.runs:
            if reference.key == other.key:
                continue
            key = comparison_key(probe_key(reference.key), probe_key(other.key))
            with contextlib.suppress(UnreadableEntry):
                if (stored := layers.read_comparison(key)) is not None:
                    kept = all(layers.has_probe(probe_key(r.key)) for r in (reference, other))
                    probe = LayerProbe(stored, tensors_kept=kept, served_from_cache=True)
                    probes.append(
                        {**probe.to_dict(study.cutoff), "sentences": probe.sentences(study.cutoff)}
                    )
            with contextlib.suppress(UnreadableEntry):
                if (repair := layers.read_repair(other.key, reference.key)) is not None:
                    model = str(context.get("model", "model.keras"))
                    code = repair_code(model, repair.precision, repair.kept)
                    repairs.append(
                        {
                            **repair.to_dict(),
                            "sentences": repair.sentences(),
                            "code": code if repair.kept else "",
                        }
                    )
    return probes, repairs
