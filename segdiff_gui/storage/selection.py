"""Naming runs on the command line: a short-id prefix or a label (``cpu b64 r1``)."""

from __future__ import annotations

from collections.abc import Sequence

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage.records import RunRecord

__all__ = ["select_run", "select_runs"]


def select_run(records: Sequence[RunRecord], name: str) -> RunRecord:
    """The one run that ``name`` means; an unknown or ambiguous name lists the candidates."""
    by_prefix = [r for r in records if r.key.startswith(name.lower())]
    by_label = [r for r in records if r.label == name]
    matches = by_label or by_prefix
    if len(matches) == 1:
        return matches[0]
    if not matches:
        known = ", ".join(f"{r.short_id} ({r.label})" for r in records[:12]) or "none"
        raise InputError(name, f"names no run in the cache (runs: {known})")
    listed = ", ".join(
        f"{r.short_id} ({r.label}, {r.model_name}, {r.target_name})" for r in matches[:12]
    )
    raise InputError(name, f"is ambiguous: {listed}")


def select_runs(records: Sequence[RunRecord], names: Sequence[str]) -> list[RunRecord]:
    return [select_run(records, name) for name in names] if names else list(records)
