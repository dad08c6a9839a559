"""How the runs of one model on one image differ from a reference run (first batch-1 CPU run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.storage.records import RunRecord

__all__ = ["differences_table", "pick_reference", "summarise_differences"]


def pick_reference(records: Sequence[RunRecord]) -> RunRecord:
    """The first batch-1 CPU run with default knobs (repeat 0), else the first run."""

    def rank(record: RunRecord) -> tuple[int, int, str]:
        config = record.run_config
        default_knobs = config.label() == f"{config.device} b1"
        return (0 if (not config.is_gpu and default_knobs) else 1, record.repeat, record.label)

    return min(records, key=rank)


def summarise_differences(records: Sequence[RunRecord], cutoff: float) -> list[dict[str, Any]]:
    if not records:
        return []
    reference = pick_reference(records)
    assert reference.probabilities is not None
    rows = []
    for record in sorted(records, key=lambda r: r.label):
        if record.key == reference.key or record.probabilities is None:
            continue
        comparison = compare_maps(reference.probabilities, record.probabilities, cutoff)
        rows.append(
            {
                "label": record.label,
                "reference": reference.label,
                "id": record.short_id,
                "bitwise_equal": comparison.bitwise_equal,
                **vars(comparison),
            }
        )
    return rows


def differences_table(rows: list[dict[str, Any]], image: str, cutoff: float) -> Table:
    table = Table(
        "run",
        "bitwise",
        "differing pixels",
        "max ULP",
        "max |Δ|",
        "mean |Δ|",
        f"flips @ {cutoff:g}",
        title=f"{image}: every run against {rows[0]['reference']}",
    )
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
