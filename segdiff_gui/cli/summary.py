"""Tables and sentences for people: every run of a study against its reference run."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.core.analysis import flips_heading
from segdiff_gui.core.exact_findings import flip_sides_named
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.core.text import printable

__all__ = ["differences_table", "exact_lines", "plain_sentences", "verdict_lines"]

_NUMBERS = (
    "bitwise_equal",
    "differing_pixels",
    "max_ulp",
    "max_abs",
    "flips",
    "nan_mismatches",
    "ties",
)


def _flip_header(study: GroupAnalysis) -> str:
    return flips_heading(study.cutoff, study.multiclass)


def differences_table(study: GroupAnalysis, image: str) -> FittedTable:
    table = FittedTable(title=f"{image}: every run against {study.reference.label}")
    table.figure("id", justify="left")
    table.name("run")
    for header in ("bitwise", "differing pixels", "max ULP", "max |Δ|", "mean |Δ|"):
        table.figure(header)
    table.figure(_flip_header(study))
    rows = study.rows()
    show_nans = any(row["nan_mismatches"] for row in rows)
    if show_nans:
        table.figure("NaN in one only")
    show_ties = any(row["ties"] for row in rows)
    if show_ties:
        table.figure("tied (no flip)")
    errors = study.exact_errors
    if errors:
        table.text("vs exact")
    for row in rows:
        table.add_row(
            row["id"],
            printable(row["label"]),
            "equal" if row["bitwise_equal"] else "differs",
            f"{row['differing_pixels']:,} / {row['pixels']:,}",
            f"{row['max_ulp']:,}",
            f"{row['max_abs']:.3g}",
            f"{row['mean_abs']:.3g}",
            f"{row['flips']:,}",
            *([f"{row['nan_mismatches']:,}"] if show_nans else []),
            *([f"{row['ties']:,}"] if show_ties else []),
            *([errors[row["key"]].summary()] if errors else []),
        )
    return table


def exact_lines(study: GroupAnalysis) -> list[str]:
    """The exact run beside the reference: the reference's own error against it (the table
    has a row for every other run), then which side of each run's flips is right."""
    if study.exact is None:
        return []
    reference = study.exact_errors[study.reference.key]
    return [
        f"Exact: {study.exact.label}, the model in float64 (beside the reference, not in its "
        "place); ≤1 ULP counts float32 steps from the exact value rounded to float32.",
        reference.sentence(study.multiclass),
        *(sides.sentence() for sides in flip_sides_named(study) if sides.flips),
    ]


def _sentence(name: str, row: dict[str, Any]) -> str:
    if row["bitwise_equal"]:
        return f"{name}: bitwise equal."
    flips = "class flip" + ("" if row["flips"] == 1 else "s")
    where = "argmax" if row["kind"] == "softmax" else f"cutoff {format_float32(row['cutoff'])}"
    nans = row["nan_mismatches"]
    nan_text = f"; {nans:,} value{'s' if nans != 1 else ''} NaN in one map only" if nans else ""
    return (
        f"{name}: NOT bitwise equal — {row['differing_pixels']:,} of {row['pixels']:,} pixels "
        f"differ, by up to {row['max_ulp']:,} ULP (max |Δ| {row['max_abs']:.3g}); "
        f"{row['flips']:,} {flips} ({where}){nan_text}{tie_text(row['ties'])}."
    )


def tie_text(ties: int) -> str:
    """What ties mean, where there are any: ``; 1,024 pixels tied …``."""
    if not ties:
        return ""
    return (
        f"; {ties:,} pixel{'s' if ties != 1 else ''} tied (classes exactly equal in one map: "
        "argmax's lowest class is no class decision, so they are not counted as flips)"
    )


def plain_sentences(study: GroupAnalysis) -> list[str]:
    """One sentence per configuration; its repeats are named together when they agree."""
    sentences = []
    for configuration, group in groupby(study.rows(), key=lambda row: row["configuration"]):
        members = list(group)
        agree = all(
            tuple(m[n] for n in _NUMBERS) == tuple(members[0][n] for n in _NUMBERS) for m in members
        )
        if agree:
            repeats = ", ".join(f"r{m['repeat']}" for m in members)
            sentences.append(
                _sentence(f"{configuration} {repeats} vs {study.reference.label}", members[0])
            )
        else:
            sentences += [_sentence(f"{m['label']} vs {study.reference.label}", m) for m in members]
    return sentences


def verdict_lines(study: GroupAnalysis) -> list[str]:
    lines = [f"{name}: {verdict.sentence()}." for name, verdict in study.verdicts.items()]
    if study.margin > 0:
        lines.append(study.at_risk_sentence())
    return lines
