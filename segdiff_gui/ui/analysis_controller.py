"""The window's explanations: attribution of a pair of runs (a dialog), the diagnosis tab, the
layers tab (a layer probe of a pair of runs) and the test-set tab (a sweep of the matrix over
every image, or a bundle's runs of every image).
It takes the inspection model, the session controller, the statistics table it listens to and
one ``notify`` callable: nothing of the window itself."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QTableWidget, QWidget
from superqt.utils import qdebounced, thread_worker

from segdiff_gui.core.attribution import Attribution, plan_attribution
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.protocol import (
    AllDone,
    BatchProgress,
    Message,
    PlanReady,
    RunFailed,
    RunStarted,
)
from segdiff_gui.core.repair import RepairResult, repair_code
from segdiff_gui.core.sweep import SweepSummary
from segdiff_gui.runner.explain import measure_attribution
from segdiff_gui.runner.layers import LayerProbe, LayerProbeSession
from segdiff_gui.runner.outcome import BatchCount
from segdiff_gui.runner.repair import RepairSession
from segdiff_gui.runner.sweeps import SweepSession
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, group_id
from segdiff_gui.ui.attribution_view import AttributionDialog
from segdiff_gui.ui.diagnosis_panel import DiagnosisPanel
from segdiff_gui.ui.inspection import InspectionModel, LayerMap
from segdiff_gui.ui.layers_view import LayersPanel
from segdiff_gui.ui.plain_text import as_html
from segdiff_gui.ui.repair_view import RepairDialog
from segdiff_gui.ui.session_controller import SessionController
from segdiff_gui.ui.sweep_panel import SweepPanel

__all__ = ["AnalysisController"]

# A sweep's progress is written at most this often, a while after a batch ended: a batch of
# 64 ends 64 runs at once, and a set of thousands of images must not keep the window busy.
PROGRESS_EVERY_MS = 250


class AnalysisController(QObject):
    def __init__(
        self,
        model: InspectionModel,
        sessions: SessionController,
        stats_table: QTableWidget,
        notify: Callable[[str, int], None],
        window: QWidget | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window  # the dialogs' parent
        self.model = model
        self.sessions = sessions
        self.state = sessions.state  # what the session can do: asked, never its type
        self.notify = notify
        self.diagnosis = DiagnosisPanel(model)
        self._truth: Path | None = None  # the ground-truth folder of the test set
        self.sweep_panel = SweepPanel()
        self.layers_panel = LayersPanel()
        self.layers_panel.probe_requested.connect(self.probe_layers)
        self.layers_panel.cancel_requested.connect(self.cancel_layers)
        self.layers_panel.repair_requested.connect(self.repair)
        self.repair_dialog: RepairDialog | None = None
        self.layers_panel.layer_chosen.connect(self._show_layer)
        self._layer_worker: Any = None
        self._layer_runner: Any = None  # the matrix runner a probe is driving, to cancel
        self.dialog: AttributionDialog | None = None
        self._explained: tuple[str, str] = ("", "")  # the keys of the pair the dialog shows
        self._measured = 0  # a newer measurement makes an older, slower one moot
        model.events.cutoff.connect(self._cutoff_moved)
        self._sweeping = False
        self._summary_worker: Any = None
        self._attribution_worker: Any = None
        self._summary_generation = 0  # a newer summary makes an older, slower one moot
        self.sweep_panel.sweep_requested.connect(self.sweep)
        self.sweep_panel.cancel_requested.connect(sessions.cancel)
        self._progress: BatchCount | None = None  # the sweep in flight's batches
        self._progress_due = QTimer(self)
        self._progress_due.setSingleShot(True)
        self._progress_due.setInterval(PROGRESS_EVERY_MS)
        self._progress_due.timeout.connect(self._show_progress)
        sessions.heard.connect(self._heard)
        self.state.events.session.connect(self.session_changed)
        self.sweep_panel.truth_chosen.connect(self._truth_chosen)
        self.sweep_panel.image_opened.connect(self.open_image)
        # Any pair: choose the reference in the toolbar, double-click the other run here.
        stats_table.setToolTip(
            "Double-click a run to explain how it differs from the reference, knob by knob"
        )
        stats_table.cellDoubleClicked.connect(self.explain_row)

    # attribution ----------------------------------------------------------------------------
    def _measure(self, show: bool, pair: tuple[str, str] | None = None) -> None:
        """Measure the reference against the focus run (or the runs of ``pair``, the keys the
        dialog explains) off the GUI thread (maps are read from the cache), then show the
        result; what is measured is fixed here, on the GUI thread."""
        model, session = self.model, self.sessions.session
        if pair is None:
            reference, other = model.reference, model.focus_run
        else:
            shown = {run.key: run for run in model.runs}
            reference, other = shown.get(pair[0]), shown.get(pair[1])
        if session is None or reference is None or other is None:
            if pair is None:
                self.notify("Explain needs two runs of one image", 8000)
            return
        try:
            plan = plan_attribution(reference.config, other.config)
        except ConfigError as error:  # no knob-by-knob path the runtimes accept
            self.notify(f"Explain: {error}", 10000)
            return
        records = list(model.records.values())
        keys = (reference.key, other.key)  # these two runs, not just their configurations
        worker = thread_worker(measure_attribution, start_thread=False)(
            session.store, records, plan, model.cutoff, keys
        )
        # Only the latest measurement is shown: one at an earlier cutoff may end later.
        self._measured += 1
        measured = self._measured

        def measured_now(attribution: Attribution) -> None:
            if measured == self._measured:
                self._show(attribution, keys, show)

        worker.returned.connect(measured_now)
        worker.errored.connect(lambda error: self.notify(f"Explain failed: {error}", 10000))
        self._attribution_worker = worker
        worker.start()

    def _show(self, attribution: Attribution, pair: tuple[str, str], show: bool) -> None:
        self._explained = pair
        if self.dialog is None:
            can_run = self.state.matrix is not None
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

    @qdebounced(timeout=150)
    def _cutoff_moved(self, *_: object) -> None:
        """The dialog on show follows the cutoff: its pair measured again (argmax ignores
        the cutoff); debounced while the slider is dragged."""
        dialog = self.dialog
        if dialog is not None and dialog.isVisible() and not dialog.attribution.multiclass:
            self._measure(show=False, pair=self._explained)

    def explain_row(self, row: int, _column: int = 0) -> None:
        study = self.model.study
        if study is not None and 0 <= row < len(study.others):
            self.model.focus_key = study.others[row].key
            self.explain()

    def run_missing(self) -> None:
        """Run the attribution's configurations that are not cached yet; they join the views."""
        dialog, session = self.dialog, self.state.editable
        if dialog is None or session is None:
            return
        self.sessions.start_runs(session.planner_for(dialog.attribution.plan.configs()))

    # layers ---------------------------------------------------------------------------------
    def probe_layers(self) -> None:
        """Probe the reference against the run last clicked, layer by layer, off the GUI
        thread: each side in the child its knobs need; served from the cache when it can."""
        model, session = self.model, self.state.matrix
        reference, other = model.reference, model.focus_run
        panel = self.layers_panel
        if session is None:
            panel.status.setText(
                "A bundle holds maps, not the model: open the model and its images to probe "
                "its layers."
            )
            return
        if reference is None or other is None or reference.key == other.key:
            panel.status.setText("Click a run other than the reference, then probe its layers.")
            return
        if self._layer_worker is not None:
            return
        request, configs = session.request, (reference.config, other.config)
        if request.source is not None:  # the user's artefact beside its Keras source
            if reference.artefact and other.artefact:
                panel.status.setText(
                    "Your artefact's layers are compared with its source's: make a run of the "
                    "source the reference, then probe an artefact's run."
                )
                return
            if not reference.artefact and not other.artefact:  # two runs of the source
                request = replace(request, model=request.source, source=None, source_configs=())
            else:  # the source's side first, whichever is the reference
                source, artefact = (other, reference) if reference.artefact else (reference, other)
                configs = (source.config, artefact.config)
        budgets = panel.budgets()

        def work() -> Generator[str, None, LayerProbe]:
            probe = LayerProbeSession(request, *configs, *budgets)
            cached = probe.cached_result()
            if cached is not None:
                return cached
            for phase in ("runs", "probes"):
                runner = probe.plain_runner() if phase == "runs" else probe.probe_runner()
                self._layer_runner = runner
                for message in runner.run():
                    if runner.cancelled:
                        raise InputError("layers", "cancelled")
                    said = _progress(message, phase)
                    if said:
                        yield said
                if runner.cancelled:
                    raise InputError("layers", "cancelled")
            return probe.compare()

        worker = thread_worker(work, start_thread=False)()
        worker.yielded.connect(lambda text: panel.set_busy(True, text))
        worker.returned.connect(self._probed)
        worker.errored.connect(self._probe_failed)
        worker.finished.connect(partial(self._finished, worker))
        self._layer_worker = worker
        panel.set_busy(True, f"probing {reference.label} and {other.label} layer by layer…")
        worker.start()

    def repair(self) -> None:
        """Repair the probed reduced precision (the run last probed) off the GUI thread."""
        session, probe = self.state.matrix, self.layers_panel.probe
        panel = self.layers_panel
        if session is None or probe is None or self._layer_worker:
            return
        target = RunConfig.from_dict(probe.stored.other["config"])
        reference: RunConfig | None = RunConfig.from_dict(probe.stored.reference["config"])
        if reference is not None and reference.precision != "float32":
            reference = None  # the same configuration in float32, as the CLI's default
        request, cutoff, bound = session.request, self.model.cutoff, panel.bound.value()
        memory_budget, disk_budget = panel.budgets()

        def work() -> Generator[str, None, tuple[RepairResult, Any, RunConfig]]:
            repair = RepairSession(
                request, target, reference=reference, cutoff=cutoff, bound=bound,
                memory_budget=memory_budget, disk_budget=disk_budget,
            )  # fmt: skip
            for what, runner in repair.runners():
                self._layer_runner = runner
                yield f"repair: {what}…"
                for message in runner.run():
                    said = _progress(message, "trials")
                    if said:
                        yield f"repair, {what}: {said}"
                if runner.cancelled:
                    raise InputError("repair", "cancelled")
            assert repair.result is not None  # made once its last round has run
            return repair.result, request, target

        worker = thread_worker(work, start_thread=False)()
        worker.yielded.connect(lambda text: panel.set_busy(True, text))
        worker.returned.connect(lambda answer: self._repaired(*answer))
        worker.errored.connect(self._probe_failed)
        worker.finished.connect(partial(self._finished, worker))
        self._layer_worker = worker
        panel.set_busy(True, f"repairing {target.label()} at cutoff {format_float32(cutoff)}…")
        worker.start()

    def _repaired(self, result: RepairResult, request: Any, target: RunConfig) -> None:
        self._probe_done()
        self.layers_panel.set_busy(False, " ".join(result.sentences()))
        code = repair_code(request.model.name, result.precision, result.kept) if result.kept else ""
        dialog = RepairDialog(result, code, self.window)
        dialog.show_run.connect(lambda: self._show_repaired(result, request, target))
        self.repair_dialog = dialog
        dialog.show()

    def _show_repaired(self, result: RepairResult, request: Any, target: RunConfig) -> None:
        """The repaired configuration's run joins the views (it is cached: a trial)."""
        config = replace(target, keep_float32=result.kept)
        plan = request.with_configs([config]).plan()
        (run,) = plan.runs
        store = request.cache
        self.model.add_run(store, store.read_run(run.key, with_map=False))
        self.model.focus_key = run.key

    def cancel_layers(self) -> None:
        if self._layer_runner is not None:
            self._layer_runner.cancel()

    def _finished(self, worker: Any) -> None:
        """A worker's thread ended: idle, unless a newer worker has started since."""
        if self._layer_worker is worker:
            self._probe_done()

    def _probe_done(self) -> None:
        """Idle again: called as soon as the answer is shown, not only once the worker's
        thread has finished (after it), so that a click on the buttons it enables is taken."""
        self._layer_worker = self._layer_runner = None

    def _probed(self, probe: LayerProbe) -> None:
        self._probe_done()
        how = " (from the cache)" if probe.served_from_cache else ""
        kept = "" if probe.tensors_kept else "; its layer tensors were over the keep-tensors budget"
        self.layers_panel.set_busy(False, f"probed{how}{kept}")
        self.layers_panel.show_probe(probe, probe.sentences(self.model.cutoff))

    def _probe_failed(self, error: Exception) -> None:
        self._probe_done()
        text = str(error) if isinstance(error, InputError) else f"{type(error).__name__}: {error}"
        self.layers_panel.set_busy(False, f"The layer probe failed: {text}")

    def _show_layer(self, index: int) -> None:
        probe = self.layers_panel.probe
        if probe is None:
            return
        layer = probe.comparison.layers[index]
        values = probe.stored.spatial.get(index)
        compared = f"{probe.reference_label} → {probe.other_label}"
        if values is None:
            self.model.layer_map = None
            self.notify(f"layer {layer.name} is not an image (shape {layer.shape})", 6000)
            return
        self.model.layer_map = LayerMap(layer.name, values, compared)

    # sweep ----------------------------------------------------------------------------------
    def _truth_chosen(self, folder: Path | None) -> None:
        self._truth = folder
        matrix = self.state.matrix
        if matrix is not None:
            matrix.truth = folder
        elif self.state.bundle is not None:
            self.summarise()  # a bundle's test set is summarised again with the masks

    def session_changed(self) -> None:
        session, matrix = self.state.session, self.state.matrix
        if self._sweeping:  # its runs were cancelled with the session they were of
            self._sweeping, self._progress = False, None
            self._progress_due.stop()
            self.sweep_panel.set_sweeping(False)
            self.sweep_panel.status.setText("The sweep was cancelled: other files were opened.")
        self._truth = matrix.truth if matrix is not None else None
        # A bundle's runs are summarised as they are; a matrix is run on every image first.
        bundle = self.state.bundle is not None
        self.sweep_panel.sweep_button.setText(
            "Summarise the bundle's images" if bundle else "Sweep every image"
        )
        self.sweep_panel.sweep_button.setEnabled(session is not None)
        self.sweep_panel.set_truth(self._truth)

    def sweep(self) -> None:
        if self.state.bundle is not None:
            self.summarise()
            return
        session = self.state.editable
        if session is None:
            return
        self._sweeping = True
        self._progress = None
        self.sweep_panel.set_sweeping(True)
        self.sweep_panel.status.setText("planning the sweep: reading every image…")
        # The Runs list keeps the target's runs; the Test set tab says how far the others are.
        self.sessions.start_runs(session.sweep_runner, listed_only=True)

    def _heard(self, message: Message) -> None:
        """A message of the sweep's runs, counted; the tab written a while after a batch
        ended (at most every PROGRESS_EVERY_MS), never for each run."""
        if not self._sweeping:
            return
        matrix = self.state.matrix
        if isinstance(message, PlanReady):
            swept = matrix.swept if matrix is not None else None
            if swept is not None and swept.plan is not None:
                self._progress = BatchCount.of(swept.plan)
                self._show_progress()
        elif isinstance(message, AllDone):  # the Runs panel says how it ended, for a while
            self._progress_due.stop()
            self._show_progress(say=False)
        elif self._progress is not None:
            ended = self._progress.add(message, time.monotonic())
            if ended and not self._progress_due.isActive():
                self._progress_due.start()

    def _show_progress(self, say: bool = True) -> None:
        progress = self._progress
        if progress is None:
            return
        text = progress.text(time.monotonic())
        self.sweep_panel.show_progress(text, progress.done, progress.total)
        if say:  # in the status bar too, seen from any tab, until the runs end
            self.notify(f"Sweep: {text}", 0)

    def worker_done(self) -> None:
        if self.dialog is not None and self.dialog.isVisible():
            self._measure(show=False, pair=self._explained)  # runs it lacked may have arrived
        if self._sweeping:
            self._sweeping = False
            self._progress_due.stop()
            self._show_progress(say=False)  # where it ended, until the summary replaces it
            self.summarise()

    def summarise(self) -> None:
        """Summarise every image of the sweep (or of the bundle), one at a time, off the GUI
        thread, against the reference, at the cutoff and with the masks on show now."""
        bundle, matrix = self.state.bundle, self.state.matrix
        reference = self.model.reference
        configuration = reference.configuration if reference else None
        cutoff, masks = self.model.cutoff, self._truth
        group, swept = None, None
        if bundle is not None:
            store: RunStore = bundle.bundle
            # The bundle's version of the model and settings on show, over every image.
            shown = self.model.records.get(reference.key) if reference else None
            group = group_id(shown) if shown else None
            runs: Callable[[], list[RunRecord]] = lambda: bundle.records  # noqa: E731
        elif matrix is not None and matrix.swept is not None:
            store, swept = matrix.cache, matrix.swept
            runs = swept.stored  # the runs the sweep stored (an unreadable one: left out)
        else:
            return

        def work() -> SweepSummary:
            made = swept.made_ahead() if swept is not None else None  # images summarised already
            sweep = SweepSession(
                store, cutoff=cutoff, runs=runs(), reference=configuration, masks=masks,
                group=group, made=made,
            )  # fmt: skip
            return sweep.summarise()

        said = self.sweep_panel.status.text() if self._progress is not None else ""
        self.sweep_panel.status.setText(f"{said}<br>summarising every image…".removeprefix("<br>"))
        self.sweep_panel.set_sweeping(True)  # busy, without a Cancel: nothing runs
        self.sweep_panel.cancel_button.setVisible(False)
        self._progress = None
        self._summary_generation += 1
        generation = self._summary_generation
        worker = thread_worker(work, start_thread=False)()

        def summarised(summary: SweepSummary) -> None:
            if generation == self._summary_generation:  # a newer one makes it moot
                self._summarised(summary, swept)

        worker.returned.connect(summarised)
        worker.errored.connect(self._sweep_failed)
        self._summary_worker = worker
        worker.start()

    def _summarised(self, summary: SweepSummary, swept: SweepSession | None) -> None:
        self.sweep_panel.set_sweeping(False)
        self.sweep_panel.show_summary(summary)
        if swept is not None:
            self.sessions.report_unreadable(swept.damaged)

    def sweep_not_started(self, error: Exception) -> None:
        """The sweep's runs could not start (its masks do not fit its images, say): said in
        the Test set tab too, where the sweep was asked for."""
        if self._sweeping:
            self._sweeping = False
            self._sweep_failed(error, "run")

    def _sweep_failed(self, error: Exception, what: str = "summarised") -> None:
        self.sweep_panel.set_sweeping(False)
        text = str(error) if isinstance(error, InputError) else f"{type(error).__name__}: {error}"
        self.sweep_panel.status.setText(as_html(f"The sweep could not be {what}: {text}"))

    def open_image(self, name: str) -> None:
        session = self.state.bundle
        if session is not None:
            titles = session.titles()
            for index, group in enumerate(session.groups):
                if group[0].target_name == name:
                    self.sessions.panel.groups.setCurrentIndex(index)
                    if len(titles) <= 1:
                        self.sessions.panel.group_chosen.emit(index)
                    return
        self.sessions.show_target(name)


def _progress(message: object, phase: str) -> str:
    """A runner's message as the Layers tab's status line ('' for none)."""
    doing = {"runs": "running", "probes": "probing"}.get(phase, "computing")
    if isinstance(message, RunStarted):
        return f"{doing} {message.label}…"
    if isinstance(message, BatchProgress) and phase == "probes":
        return f"probing: {message.what}"
    if isinstance(message, RunFailed):
        return f"{message.label} failed: {message.error}"
    return ""
