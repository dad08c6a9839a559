"""What a notebook's study writes: a run's flip mask, its flipped pixels as CSV and the
report to attach to a bug report, the files of ``segdiff export`` and ``segdiff report``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segdiff_gui.api.arguments import output_path
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.io.html_report import write_html_report
from segdiff_gui.io.masks import write_mask
from segdiff_gui.io.reports import write_json_report
from segdiff_gui.io.tables import write_pixel_csv
from segdiff_gui.runner.reports import ReportContext, study_report
from segdiff_gui.storage.studies import RunStore

__all__ = ["write_flip_mask", "write_flipped_pixels", "write_study_report"]


def write_flip_mask(path: str | Path, flips: np.ndarray) -> Path:
    target = output_path(path, "mask")
    write_mask(target, flips)
    return target


def write_flipped_pixels(
    path: str | Path, study: GroupAnalysis, run: StudyRun, at_risk: bool
) -> Path:
    target = output_path(path, "table")
    write_pixel_csv(target, study, run, include_at_risk=at_risk)
    return target


def write_study_report(
    store: RunStore,
    study: GroupAnalysis,
    context: ReportContext,
    *,
    image: np.ndarray | None,
    html: str | Path | None,
    json: str | Path | None,
    image_unreadable: bool = False,
) -> list[Path]:
    """The HTML and/or JSON report of ``study``; the files written, HTML first."""
    if html is None and json is None:
        raise InputError("report", "name what to write: html=FILE and/or json=FILE")
    data = study_report(store, study, context)
    written = []
    if html is not None:
        path = output_path(html, "report")
        written.append(write_html_report(path, data, study, image, image_unreadable))
    if json is not None:
        written.append(write_json_report(output_path(json, "report"), data))
    return [Path(path) for path in written]
