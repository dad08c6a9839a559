"""A study's report, assembled once for both front ends (``segdiff report`` and the window's
File › Export report): the analysis, every run's provenance read from its store, and what the
report is about."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from segdiff_gui.core.diagnosis import diagnose
from segdiff_gui.core.exact import ExactSummary
from segdiff_gui.core.findings import Finding
from segdiff_gui.core.repair import repair_code
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.core.tolerance import OutputTolerances, ToleranceCheck, tolerance_checks
from segdiff_gui.io.reports import report_data
from segdiff_gui.runner.layers import LayerProbe
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.hdf5_access import UnreadableEntry
from segdiff_gui.storage.layers import LayerStore, comparison_key, probe_key
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, group_id, output_names

__all__ = [
    "ComparisonSummary",
    "DiagnosisSummary",
    "ReportContext",
    "ToleranceSummary",
    "comparison_summary",
    "diagnosis_summary",
    "report_context",
    "study_report",
    "tolerance_summary",
]


@dataclass(frozen=True)
class ReportContext:
    """What a report (or a command's JSON) says it is about: the model, the image, the group
    and its settings, and where the runs were read ("" where not said)."""

    model: str
    image: str
    group: str
    preprocessing: dict[str, Any]
    output: dict[str, Any]
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The first keys of a report and of ``compare --json``/``diagnose --json``."""
        context: dict[str, Any] = {
            "model": self.model,
            "image": self.image,
            "group": self.group,
            "settings": {"preprocessing": self.preprocessing, "output": self.output},
        }
        if self.source:
            context["source"] = self.source
        return context


def report_context(record: RunRecord, source: str = "") -> ReportContext:
    """The context of ``record``'s group, read from ``source`` (a cache or a bundle)."""
    return ReportContext(
        model=record.study_model_name,
        image=record.target_name,
        group=group_id(record),
        preprocessing=record.preprocessing,
        output=record.output,
        source=source,
    )


@dataclass(frozen=True)
class ComparisonSummary:
    """Every run against the reference, the repeats' verdicts and the at-risk pixels: what
    ``segdiff compare --json`` prints for a group (:meth:`to_dict`) and the API's comparison
    reads."""

    context: ReportContext
    cutoff: float
    reference: str  # its label
    comparisons: list[dict[str, Any]]  # a row of figures per run (GroupAnalysis.rows)
    determinism: dict[str, str]  # a repeated configuration's verdict, as a sentence
    at_risk_margin: float
    at_risk_pixels: int
    # Every run against the exact (float64) run, where the group has one: beside the
    # reference, never in its place.
    exact: ExactSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        exact = {"exact": self.exact.to_dict()} if self.exact else {}
        return {
            **self.context.to_dict(),
            "cutoff": self.cutoff,
            "reference": self.reference,
            "comparisons": self.comparisons,
            "determinism": self.determinism,
            "at_risk": {"margin": self.at_risk_margin, "pixels": self.at_risk_pixels},
            **exact,
        }


def comparison_summary(study: GroupAnalysis, context: ReportContext) -> ComparisonSummary:
    return ComparisonSummary(
        context=context,
        cutoff=study.cutoff,
        reference=study.reference.label,
        comparisons=study.rows(),
        determinism={name: verdict.sentence() for name, verdict in study.verdicts.items()},
        at_risk_margin=study.margin,
        at_risk_pixels=int(study.at_risk.sum()),
        exact=study.exact_summary(),
    )


@dataclass(frozen=True)
class DiagnosisSummary:
    """The diagnosis's findings: what ``segdiff diagnose --json`` prints for a group
    (:meth:`to_dict`) and the API's diagnosis reads."""

    context: ReportContext
    reference: str  # its label
    cutoff: float
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.context.to_dict(),
            "reference": self.reference,
            "cutoff": self.cutoff,
            "findings": [finding.to_dict() for finding in self.findings],
        }


def diagnosis_summary(study: GroupAnalysis, context: ReportContext) -> DiagnosisSummary:
    return DiagnosisSummary(context, study.reference.label, study.cutoff, tuple(diagnose(study)))


@dataclass(frozen=True)
class ToleranceSummary:
    """A group's runs against its reference under the tolerance of its output
    (core/tolerance.py): what ``segdiff check --json`` gives of each run (:meth:`rows`), its
    FAIL lines, and what the API's ``Study.tolerance`` reads."""

    group: str
    title: str
    checks: tuple[ToleranceCheck, ...]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def rows(self) -> list[dict[str, Any]]:
        return [{"group": self.group, "title": self.title, **c.to_dict()} for c in self.checks]

    def failures(self) -> list[str]:
        return [check.failure(self.title) for check in self.checks if not check.passed]


def tolerance_summary(
    study: GroupAnalysis, record: RunRecord, title: str, tolerances: OutputTolerances
) -> ToleranceSummary | None:
    """``study`` (the group of ``record``) under the tolerance ``tolerances`` give its output
    (by its name, or by what ``--output`` chose, else the one given without a name); None
    where none applies to it."""
    names = output_names(record)
    tolerance = tolerances.for_output(names)
    if tolerance is None:
        return None
    checks = tolerance_checks(study, tolerance, tolerances.output_of(names))
    return ToleranceSummary(group_id(record), title, tuple(checks))


def study_report(store: RunStore, study: GroupAnalysis, context: ReportContext) -> dict[str, Any]:
    """The report's data: ``study`` with the provenance of each of its runs (and the oneDNN
    and OpenVINO inference precision it had, in words), and the layer probes and precision
    repairs a cache holds for pairs of its runs."""
    provenance = {}
    for run in study.all_runs:
        stored = store.read_run(run.key, with_map=False).provenance
        provenance[run.key] = {
            **stored.to_dict(),
            "onednn_in_effect": stored.onednn_in_effect(run.config),
            "inference_precision_in_effect": stored.inference_precision_in_effect(run.config),
            "session_settings_in_effect": stored.session_settings_text(run.config),
        }
    data = report_data(study, provenance, context.to_dict())
    if isinstance(store, ResultCache):
        data["layer_probes"], data["repairs"] = _layer_findings(store, study, context.model)
    return data


def _layer_findings(
    cache: ResultCache, study: GroupAnalysis, model: str
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
                    code = repair_code(model, repair.precision, repair.kept)
                    repairs.append(
                        {
                            **repair.to_dict(),
                            "sentences": repair.sentences(),
                            "code": code if repair.kept else "",
                        }
                    )
    return probes, repairs
