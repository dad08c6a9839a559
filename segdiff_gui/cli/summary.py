"""How the runs of one model on one image differ from a reference run (first batch-1 CPU run)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from rich.table import Table

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.storage.records import RunRecord

__all__ = ["differences_table", "pick_reference", "plain_sentences", "summarise_differences"]

_NUMBERS = ("differing_pixels", "max_ulp", "max_abs", "flips")


def pick_reference(records: Sequence[RunRecord]) -> RunRecord:
    """The first batch-1 CPU run with default knobs (repeat 0), else the first run."""

    def rank(record: RunRecord) -> tuple[int, int]:
        config = record.run_config
        plain_cpu = not config.is_gpu and config.label() == f"{config.device} b1"
        return (0 if plain_cpu else 1, record.repeat)

    return min(records, key=rank)


def summarise_differences(records: Sequence[RunRecord], cutoff: float) -> list[dict[str, Any]]:
    """One row per run (in the order given) against the reference run."""
    if not records:
        return []
    reference = pick_reference(records)
    assert reference.probabilities is not None
    rows = []
    for record in records:
        if record.key == reference.key or record.probabilities is None:
            continue
        comparison = compare_maps(reference.probabilities, record.probabilities, cutoff)
        rows.append(
            {
                "label": record.label,
                "configuration": record.run_config.label(),
                "repeat": record.repeat,
                "reference": reference.label,
                "id": record.short_id,
                "kind": record.kind,
                "bitwise_equal": comparison.bitwise_equal,
                **vars(comparison),
            }
        )
    return rows


def _flip_header(rows: list[dict[str, Any]], cutoff: float) -> str:
    return "class flips (argmax)" if rows[0]["kind"] == "softmax" else f"flips @ {cutoff:g}"


def differences_table(rows: list[dict[str, Any]], image: str, cutoff: float) -> Table:
    table = Table(title=f"{image}: every run against {rows[0]['reference']}")
    table.add_column("run", no_wrap=True)
    for header in ("bitwise", "differing pixels", "max ULP", "max |Δ|", "mean |Δ|"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column(_flip_header(rows, cutoff), justify="right")
    for row in rows:
        table.add_row(
            row["label"],
            "equal" if row["bitwise_equal"] else "differs",
            f"{row['differing_pixels']:,} / {row['pixels']:,}",
            str(row["max_ulp"]),
            f"{row['max_abs']:.3g}",
            f"{row['mean_abs']:.3g}",
            str(row["flips"]),
        )
    return table


def plain_sentences(rows: list[dict[str, Any]]) -> list[str]:
    """One sentence per configuration: its repeats are named together when they agree."""
    sentences = []
    for configuration, group in groupby(rows, key=lambda row: row["configuration"]):
        members = list(group)
        if any(
            tuple(m[n] for n in _NUMBERS) != tuple(members[0][n] for n in _NUMBERS) for m in members
        ):
            continue  # repeats disagree: the table shows each; nondeterminism has its own report
        first = members[0]
        repeats = ", ".join(f"r{m['repeat']}" for m in members)
        name = f"{configuration} {repeats} vs {first['reference']}"
        if first["bitwise_equal"]:
            sentences.append(f"{name}: bitwise equal.")
            continue
        flips = "class flip" + ("s" if first["flips"] != 1 else "")
        where = "argmax" if first["kind"] == "softmax" else f"cutoff {first['cutoff']:g}"
        sentences.append(
            f"{name}: NOT bitwise equal — {first['differing_pixels']:,} of "
            f"{first['pixels']:,} pixels differ, by up to {first['max_ulp']:,} ULP "
            f"(max |Δ| {first['max_abs']:.3g}); {first['flips']:,} {flips} ({where})."
        )
    return sentences
