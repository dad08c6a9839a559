"""The window's explanations: attribution of a pair of runs (a dialog), the diagnosis tab and
the test-set sweep tab. Kept apart from the main window so that it stays about the views."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from superqt.utils import thread_worker

from segdiff_gui.core.attribution import Attribution, plan_attribution
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.sweep import SweepSummary
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.runner.explain import measure_attribution
from segdiff_gui.runner.sweeps import summarise_sweep, sweep_groups
from segdiff_gui.ui.attribution_view import AttributionDialog
from segdiff_gui.ui.diagnosis_panel import DiagnosisPanel
from segdiff_gui.ui.session import MatrixSession
from segdiff_gui.ui.sweep_panel import SweepPanel

if TYPE_CHECKING:
    from segdiff_gui.ui.main_window import MainWindow

__all__ = ["AnalysisController"]


class AnalysisController(QObject):
    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.diagnosis = DiagnosisPanel(window.model)
        self.sweep_panel = SweepPanel()
        self.dialog: AttributionDialog | None = None
        self._sweeping = False
        self._summary_worker: Any = None
        self._attribution_worker: Any = None
        self._summary_generation = 0  # a newer summary makes an older, slower one moot
        self.sweep_panel.sweep_requested.connect(self.sweep)
        self.sweep_panel.truth_chosen.connect(self._truth_chosen)
        self.sweep_panel.image_opened.connect(self.open_image)
        # Any pair: choose the reference in the toolbar, double-click the other run here.
        window.stats.table.setToolTip(
            "Double-click a run to explain how it differs from the reference, knob by knob"
        )
        window.stats.table.cellDoubleClicked.connect(self.explain_row)

    # attribution ----------------------------------------------------------------------------
    def _measure(self, show: bool) -> None:
        """Measure the reference against the focus run off the GUI thread (maps are read from
        the cache), then show the result; what is measured is fixed here, on the GUI thread."""
        model, session = self.window.model, self.window.session
        reference, other = model.reference, model.focus_run
        if session is None or reference is None or other is None:
            self.window.statusBar().showMessage("Explain needs two runs of one image", 8000)
            return
        plan = plan_attribution(reference.config, other.config)
        records = list(model.records.values())
        keys = (reference.key, other.key)  # these two runs, not just their configurations
        worker = thread_worker(measure_attribution, start_thread=False)(
            session.store, records, plan, model.cutoff, keys
        )
        worker.returned.connect(lambda attribution: self._show(attribution, show))
        worker.errored.connect(
            lambda error: self.window.statusBar().showMessage(f"Explain failed: {error}", 10000)
        )
        self._attribution_worker = worker
        worker.start()

    def _show(self, attribution: Attribution, show: bool) -> None:
        if self.dialog is None:
            can_run = isinstance(self.window.session, MatrixSession)
            self.dialog = AttributionDialog(attribution, can_run, self.window)
            self.dialog.run_missing.connect(self.run_missing)
        else:
            self.dialog.set_attribution(attribution)
        if show:
            self.dialog.show()
            self.dialog.raise_()

    def explain(self) -> None:
        """Explain the reference against the run last clicked (else the one with most flips)."""
        self._measure(show=True)

    def explain_row(self, row: int, _column: int = 0) -> None:
        study = self.window.model.study
        if study is not None and 0 <= row < len(study.others):
            self.window.model.set_focus(study.others[row].key)
            self.explain()

    def run_missing(self) -> None:
        """Run the attribution's configurations that are not cached yet; they join the views."""
        window, dialog, session = self.window, self.dialog, self.window.session
        if dialog is None or not isinstance(session, MatrixSession) or window.worker:
            return
        window.start_runs(session.planner_for(dialog.attribution.plan.configs()))

    # sweep ----------------------------------------------------------------------------------
    def _truth_chosen(self, folder: object) -> None:
        if isinstance(self.window.session, MatrixSession):
            self.window.session.truth = folder  # type: ignore[assignment]

    def session_changed(self) -> None:
        session = self.window.session
        is_matrix = isinstance(session, MatrixSession)
        self.sweep_panel.sweep_button.setEnabled(is_matrix)
        self.sweep_panel.set_truth(session.truth if isinstance(session, MatrixSession) else None)

    def sweep(self) -> None:
        session = self.window.session
        if not isinstance(session, MatrixSession) or self.window.worker is not None:
            return
        self._sweeping = True
        self.sweep_panel.status.setText("running the matrix on every image…")
        self.window.start_runs(session.plan_sweep_with_devices)

    def worker_done(self) -> None:
        if self.dialog is not None and self.dialog.isVisible():
            self._measure(show=False)  # runs it lacked may have arrived
        if self._sweeping:
            self._sweeping = False
            self.summarise()

    def summarise(self) -> None:
        """Summarise every image of the sweep, one at a time, off the GUI thread."""
        session = self.window.session
        if not isinstance(session, MatrixSession):
            return
        reference = self.window.model.reference
        configuration = reference.configuration if reference else None
        cutoff = self.window.model.cutoff
        truth = session.truth

        plan = session.sweep_plan
        if plan is None:
            return

        def work() -> SweepSummary:
            cache = session.cache
            records = [cache.read_run(r.key, with_map=False) for r in plan.runs if cache.has(r.key)]
            folder = TruthFolder(truth) if truth else None
            return summarise_sweep(cache, sweep_groups(records), cutoff, configuration, folder)

        self.sweep_panel.status.setText("summarising every image…")
        self._summary_generation += 1
        generation = self._summary_generation
        worker = thread_worker(work, start_thread=False)()
        worker.returned.connect(
            lambda summary: (
                generation == self._summary_generation and self.sweep_panel.show_summary(summary)
            )
        )
        worker.errored.connect(self._sweep_failed)
        self._summary_worker = worker
        worker.start()

    def _sweep_failed(self, error: Exception) -> None:
        text = str(error) if isinstance(error, InputError) else f"{type(error).__name__}: {error}"
        self.sweep_panel.status.setText(f"The sweep could not be summarised: {text}")

    def open_image(self, name: str) -> None:
        self.window.show_target(name)
