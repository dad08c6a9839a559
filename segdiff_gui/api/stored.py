"""The stored runs behind a :class:`~segdiff_gui.api.study.Study`: one comparable group in a
cache or a bundle, loaded into its analysis by the one loader (bit-exactly, a damaged map
left out and named), and runs named the way every front end names them."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.core.text import printable
from segdiff_gui.storage.loading import ChosenGroup, load_group
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_reference
from segdiff_gui.storage.studies import RunStore, target_image

__all__ = ["Run", "RunName", "StoredGroup"]


@dataclass(frozen=True)
class Run:
    """One stored run: what it is (``label``, ``configuration``, ``repeat``, ``config``), where
    it is (``key``, ``id``) and where it ran (``provenance``: device, versions, host, time;
    ``provenance.to_dict()`` for every attribute as stored)."""

    key: str
    label: str
    configuration: str
    repeat: int
    config: RunConfig
    provenance: Provenance = field(repr=False)

    @property
    def id(self) -> str:
        return self.key[:8]

    @property
    def spec(self) -> str:
        """The ``key=value`` spec that runs this configuration again."""
        return self.config.to_spec()

    @property
    def device(self) -> str:
        return self.provenance.device or ""

    @classmethod
    def of(cls, record: RunRecord) -> Run:
        return cls(
            record.key,
            record.label,
            record.configuration,
            record.repeat,
            record.run_config,
            record.provenance,
        )

    def row(self) -> dict[str, Any]:
        """The run as a row of ``Study.runs_table()``."""
        p = self.provenance
        return {
            "label": self.label,
            "id": self.id,
            "configuration": self.configuration,
            "repeat": self.repeat,
            "spec": self.spec,
            "device": self.device,
            "runtime": p.runtime,
            "runtime_version": p.version,
            "host": p.hostname or "",
            "merged_from": (p.merged_from_bundle or "") if p.merged else "",
            "timestamp": p.timestamp or "",
            "key": self.key,
        }


RunName = str | Run  # a run's label, id prefix or key, a configuration's label, or a Run


class StoredGroup:
    """``records`` (one comparable group) of ``store`` against ``reference`` (default: this
    machine's batch-1 CPU run). :meth:`load` reads the maps; a run whose map is damaged (a
    chunk that does not inflate, a checksum that does not match) then leaves ``records``,
    named in ``damaged`` and in a warning, and the others are analysed."""

    def __init__(
        self,
        store: RunStore,
        records: Sequence[RunRecord],
        reference: RunRecord | None = None,
        exact: RunRecord | None = None,
    ) -> None:
        self.store = store
        # The exact run (float64) is no run of the group (the loader chose the group's, and
        # keeps it apart): it is kept beside it as ``exact``.
        self.records = list(records)
        self.reference = reference
        #: The group's exact run (float64), compared beside the reference; None: none.
        self.exact = exact
        #: The runs left out because their stored map could not be read, one line each.
        self.damaged: list[str] = []

    def with_reference(self, reference: RunRecord | None) -> StoredGroup:
        """The same runs against another reference."""
        group = StoredGroup(self.store, self.records, reference, self.exact)
        group.damaged = list(self.damaged)
        return group

    def load(self, cutoff: float) -> GroupAnalysis:
        """The group's analysis at ``cutoff``, its maps read once by the one loader
        (:func:`~segdiff_gui.storage.loading.load_group`); the damaged ones left out."""
        damaged: list[InputError] = []
        chosen = ChosenGroup(self.records, self.reference, self.exact, "")
        study = load_group(self.store, chosen, cutoff, damaged)
        if not damaged:
            return study
        if self.exact is not None and study.exact is None:  # its map cannot be read
            error = next((e for e in damaged if self.exact.key in str(e)), damaged[0])
            self.damaged.append(f"{self.exact.label}: {error}")
            warnings.warn(printable(f"left out {self.exact.label}: {error}"), stacklevel=4)
            self.exact = None
        loaded = {run.key for run in study.runs}

        def error_of(record: RunRecord) -> InputError:
            return next((e for e in damaged if record.key in str(e)), damaged[0])

        if self.reference is not None and self.reference.key not in loaded:
            raise InputError(
                self.reference.label,
                f"is the reference, and its map cannot be read: {error_of(self.reference)}",
            )
        for record in self.records:
            if record.key not in loaded:
                self.damaged.append(f"{record.label}: {error_of(record)}")
                left_out = f"left out {record.label}: {error_of(record)}"
                warnings.warn(printable(left_out), stacklevel=4)
        self.records = [record for record in self.records if record.key in loaded]
        return study

    def select(self, run: RunName) -> RunRecord:
        """The run ``run`` names, as ``--ref`` does in every command; a name that matches no
        run lists the group's labels."""
        if isinstance(run, Run):
            if all(record.key != run.key for record in self.records):
                raise InputError(run.label, "is a run of another study")
            return self.record(run.key)
        if not isinstance(run, str):
            raise InputError(repr(run), "is no run: give a label, an id or a Run")
        if not run or not any(
            run in (r.label, r.configuration) or r.key.startswith(run.lower()) for r in self.records
        ):
            if any(line.startswith(f"{run}: ") for line in self.damaged):
                raise InputError(run, "is left out: its stored map cannot be read (study.damaged)")
            labels = ", ".join(record.label for record in self.records[:12])
            more = ", …" if len(self.records) > 12 else ""
            raise InputError(
                run, f"names no run of this study (runs: {labels}{more}; see study.runs_table())"
            )
        return select_reference(self.records, run)

    def record(self, key: str) -> RunRecord:
        return next(record for record in self.records if record.key == key)

    def analysed_run(self, run: RunName, analysed: GroupAnalysis) -> StudyRun:
        """``run`` in ``analysed`` (whose loading has left the damaged runs out)."""
        key = self.select(run).key
        return next(r for r in analysed.runs if r.key == key)

    def runs(self) -> list[Run]:
        return [Run.of(record) for record in self.records]

    def rows(self) -> list[dict[str, Any]]:
        return [Run.of(record).row() for record in self.records]

    @cached_property
    def _picture(self) -> tuple[np.ndarray | None, bool]:
        """The target image read once, and whether a stored one could not be read (then
        left out, and said once as a ``RuntimeWarning``)."""
        image, problem = target_image(self.store, self.records[0].target_hash)
        if problem is not None:
            warnings.warn(printable(str(problem)), RuntimeWarning, stacklevel=3)
        return image, problem is not None

    @property
    def image(self) -> np.ndarray | None:
        """The target image, for pictures."""
        return self._picture[0]

    @property
    def image_unreadable(self) -> bool:
        return self._picture[1]
