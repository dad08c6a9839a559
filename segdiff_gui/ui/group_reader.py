"""A large bundle group's other runs, read on a worker thread while the window shows the first:
four 8192² maps take seconds to read, and the first is on screen long before the last.

The others join the grid together, once the last is read: each addition redraws every view
(and its flips against the reference), and adding them one by one as they arrived painted the
whole group about half a second later (4 × 8192², open → all painted: 3.8–4.2 s one by one,
3.1–3.9 s together, the first map at 1.1–1.5 s either way)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, Signal
from superqt.utils import thread_worker

from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.session import read_runs

__all__ = ["GroupReader"]


class GroupReader(QObject):
    """Reads ``records`` from ``store`` and adds them to ``model``, with one redraw, once the
    last is read; ``added`` runs then, and ``finished`` is emitted (neither after stop())."""

    finished = Signal()

    def __init__(
        self,
        model: InspectionModel,
        store: RunStore,
        records: Sequence[RunRecord],
        added: Callable[[], None],
    ) -> None:
        super().__init__()
        self.model, self.store, self._added = model, store, added
        self._arrived: list[Any] = []
        self._stopped = False
        self._worker = thread_worker(read_runs, start_thread=False)(store, list(records))
        self._worker.yielded.connect(self._on_arrival)
        # superqt types finished as carrying None; it carries nothing
        self._worker.finished.connect(self._on_finished)  # type: ignore[arg-type]

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        """Drop what is still to come (the worker stops at its next map)."""
        self._stopped = True
        self._worker.quit()

    def _on_arrival(self, item: Any) -> None:
        if not self._stopped:
            self._arrived.append(item)

    def _on_finished(self) -> None:
        if not self._stopped:
            self.model.add_read_runs(self.store, self._arrived)
            self._arrived = []
            self._added()
            self.finished.emit()
