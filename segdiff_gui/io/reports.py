"""Reports of a study: the data (JSON) and one self-contained HTML file for bug reports."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.floatfmt import json_text
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.version import __version__

__all__ = ["CURVE_POINTS", "report_data", "write_json_report"]

CURVE_POINTS = 201


def report_data(
    study: GroupAnalysis, provenance: dict[str, dict[str, Any]], context: dict[str, Any]
) -> dict[str, Any]:
    """Everything a report says, as plain JSON-ready data.

    ``provenance`` maps run keys to their provenance as the report shows it (every stored
    attribute, and the oneDNN in effect in words: ``runner/reports.study_report``);
    ``context`` names the model, image and anything else the caller wants on the first lines
    (e.g. the cache folder).
    """
    curves = {}
    if not study.multiclass:
        grid = np.linspace(0.0, 1.0, CURVE_POINTS)
        for run in study.others:
            curves[run.label] = study.curve(run).at(grid).tolist()
    return {
        "segdiff_version": __version__,
        "created": local_timestamp(),
        **context,
        "kind": "softmax" if study.multiclass else "sigmoid",
        "cutoff": study.cutoff,
        "class_rule": "argmax (ties: lowest class)" if study.multiclass else "p >= cutoff",
        "reference": {"key": study.reference.key, "label": study.reference.label},
        "comparisons": study.rows(),
        "pairwise": study.pairwise(),
        "determinism": {
            name: {**asdict(verdict), "verdict": verdict.sentence()}
            for name, verdict in study.verdicts.items()
        },
        "at_risk": {
            "margin": study.margin,
            "pixels": int(study.at_risk.sum()),
            "sentence": study.at_risk_sentence(),
        },
        "flip_curves": {"cutoffs": np.linspace(0.0, 1.0, CURVE_POINTS).tolist(), **curves}
        if curves
        else {},
        "runs": [
            {
                "key": run.key,
                "label": run.label,
                "configuration": run.configuration,
                "repeat": run.repeat,
                "config": run.config.to_dict(),
                "provenance": dict(provenance.get(run.key, {})),
            }
            for run in study.all_runs
        ],
        **({"exact": exact.to_dict()} if (exact := study.exact_summary()) else {}),
    }


def write_json_report(path: str | Path, data: dict[str, Any]) -> Path:
    path = Path(path)
    path.write_text(json_text(data), encoding="utf-8")
    return path
