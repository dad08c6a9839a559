"""Tables as CSV: the flipped (and at-risk) pixels with every run's exact value at each pixel
(and the exact run's, where the study has one), and a sweep's figures per image and
configuration."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import numpy as np

from segdiff_gui.core.analysis import class_map, ulp_distance
from segdiff_gui.core.floatfmt import float32_bits, format_float32
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.core.sweep import SweepSummary

__all__ = ["pixel_table", "spreadsheet_cell", "write_pixel_csv", "write_sweep_csv"]


def _values_at(
    run: StudyRun, classes: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    """The probability shown for a pixel: the map's value, or for a multi-class map the
    probability of the class the reference assigns there."""
    maps = run.probabilities
    if maps.ndim == 3 and maps.shape[-1] > 1:
        picked: np.ndarray = maps[rows, cols, classes]
        return picked
    values: np.ndarray = (maps[..., 0] if maps.ndim == 3 else maps)[rows, cols]
    return values


def pixel_table(
    study: GroupAnalysis, other: StudyRun, include_at_risk: bool = False
) -> tuple[list[str], list[list[object]]]:
    """The header and rows of one line per pixel that flips between the reference and
    ``other`` (and, with ``include_at_risk``, per at-risk pixel): row, column, why; beside an
    exact run (the study's ``exact``, the model in float64) its value there (a float64,
    exact), its class and whether float32 can decide that class (core/exact.py); then for
    every run of the study its exact value (shortest round-trip float32), its bits in hex, the
    ULP distance to the reference and its class."""
    flipped = study.flips(other)
    chosen = flipped | study.at_risk if include_at_risk else flipped
    rows, cols = np.nonzero(chosen)
    reference = study.reference
    ref_classes = class_map(reference.probabilities, study.cutoff)[rows, cols]
    ref_values = _values_at(reference, ref_classes, rows, cols)
    columns: list[list[object]] = []
    header = ["row", "column", "why"]
    multiclass = reference.probabilities.ndim == 3 and reference.probabilities.shape[-1] > 1
    # Multi-class: the probability of the class the reference assigns, named in its column.
    value_name = "p(reference class)" if multiclass else "value"
    if multiclass:
        header.append("reference class")
        columns.append([int(c) for c in ref_classes])
    exact, decided = study.exact, study.exact_decided
    if exact is not None and decided is not None:
        header += [f"exact {value_name} (float64)", "exact class", "float32 can decide"]
        columns += [
            [float(v) for v in _values_at(exact, ref_classes, rows, cols)],
            [int(c) for c in decided.classes[rows, cols]],
            [not bool(u) for u in decided.undecidable[rows, cols]],
        ]
    for run in study.runs:
        values = _values_at(run, ref_classes, rows, cols)
        classes = class_map(run.probabilities, study.cutoff)[rows, cols]
        ulps = ulp_distance(ref_values, values)
        header += [f"{run.label} {name}" for name in (value_name, "bits", "ulp", "class")]
        columns += [
            [format_float32(v) for v in values],
            [float32_bits(v) for v in values],
            [str(u) for u in ulps],
            [str(c) for c in classes],
        ]
    why = np.where(flipped[rows, cols], "flip", "at-risk")
    lines: list[list[object]] = [
        [int(rows[index]), int(cols[index]), str(why[index])]
        + [column[index] for column in columns]
        for index in range(len(rows))
    ]
    return header, lines


# A spreadsheet takes a cell that begins with one of these for a formula (OWASP, "CSV
# Injection"): a text cell that does is written with a leading apostrophe, shown as text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(cell: object) -> object:
    """``cell`` as a spreadsheet shows it as text: a name ``=HYPERLINK(…)`` becomes
    ``'=HYPERLINK(…)``; numbers, and text that reads as a number (``-0.5``), are left alone."""
    if not isinstance(cell, str) or not cell.startswith(_FORMULA_START):
        return cell
    try:
        float(cell)
    except ValueError:
        return "'" + cell
    return cell


class _SpreadsheetWriter:
    """A CSV writer whose every cell passes :func:`spreadsheet_cell`."""

    def __init__(self, handle: TextIO) -> None:
        self._writer = csv.writer(handle)

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([spreadsheet_cell(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def write_pixel_csv(
    path: str | Path, study: GroupAnalysis, other: StudyRun, include_at_risk: bool = False
) -> int:
    """Write :func:`pixel_table` as CSV. Returns the number of pixels written."""
    header, lines = pixel_table(study, other, include_at_risk)
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = _SpreadsheetWriter(handle)
        writer.writerow(header)
        writer.writerows(lines)
    return len(lines)


_SWEEP_FIGURES = ("flips", "at_risk", "max_ulp", "max_abs", "differing_pixels")


def write_sweep_csv(path: str | Path, summary: SweepSummary) -> int:
    """One line per image and configuration: its figures against the reference and, with
    ground truth, Dice and IoU of each repeat. Returns the number of lines written."""
    repeats = max(
        (
            len(entry.overlaps or ())
            for image in summary.images
            for entry in image.configurations.values()
        ),
        default=0,
    )
    header = ["image", "configuration", *_SWEEP_FIGURES]
    header += [f"{score} r{r}" for r in range(repeats) for score in ("dice", "iou")]
    count = 0
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = _SpreadsheetWriter(handle)
        writer.writerow(header)
        for image in summary.images:
            for name, entry in image.configurations.items():
                figures = entry.effect.to_dict()
                scores = [
                    repr(value)
                    for overlap in entry.overlaps or ()
                    for value in (overlap.dice, overlap.iou)
                ]
                writer.writerow([image.image, name, *(figures[f] for f in _SWEEP_FIGURES), *scores])
                count += 1
    return count
