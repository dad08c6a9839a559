"""A stored run as it is listed: one value for ``segdiff ls --json``'s entry and a row of the
API's ``Runs.table()``, so the two front ends list the same keys with the same values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import group_id, settings_text

__all__ = ["ListedRun"]


@dataclass(frozen=True)
class ListedRun:
    """``record`` in the group ``segdiff ls`` shows it in (its id, :func:`group_id`'s)."""

    record: RunRecord

    def to_dict(self) -> dict[str, Any]:
        """``segdiff ls --json``'s entry: the run's names, its configuration as stored, and its
        whole provenance."""
        r = self.record
        return {
            "id": r.short_id,
            "key": r.key,
            "label": r.label,
            "group": group_id(r),
            "model": r.model_name,
            "image": r.target_name,
            "shape": list(r.map_shape),
            "kind": r.kind,
            "config": r.config,
            "repeat": r.repeat,
            "preprocessing": r.preprocessing,
            "output": r.output,
            "provenance": r.provenance.to_dict(),
        }

    def row(self) -> dict[str, Any]:
        """:meth:`to_dict` with the columns a table of runs is read by first: the settings
        that are not the default, and the device, runtime, host, whether merged and when,
        from the provenance."""
        p = self.record.provenance
        return {
            **self.to_dict(),
            "settings": settings_text(self.record) or "defaults",
            "device": p.device or "",
            "runtime": p.runtime,
            "host": p.hostname or "",
            "merged": p.merged,
            "timestamp": p.timestamp or "",
        }
