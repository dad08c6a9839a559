"""A study's report, assembled once for both front ends (``segdiff report`` and the window's
File › Export report): the analysis, every run's provenance read from its store, and what the
report is about."""

from __future__ import annotations

from typing import Any

from segdiff_gui.core.study import Study
from segdiff_gui.io.reports import report_data
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, group_id

__all__ = ["report_context", "study_report"]


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


def study_report(store: RunStore, study: Study, context: dict[str, Any]) -> dict[str, Any]:
    """The report's data: ``study`` with the provenance of each of its runs."""
    provenance = {run.key: store.read_run(run.key, with_map=False).provenance for run in study.runs}
    return report_data(study, provenance, context)
