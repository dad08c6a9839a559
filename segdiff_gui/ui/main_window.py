"""The segdiff-gui main window: views in the middle, the cutoff and view controls on top, the
inspector and statistics on the right, the runs, the model's settings and the matrix on the
left. It builds the parts and wires their menus; the parts do the work (session control,
exports, layout policy, analysis) and take the Qt-free inspection model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QTabWidget,
)
from superqt.utils import WorkerBase

from segdiff_gui.core.artefacts import ARTEFACT_FORMATS
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.text import printable
from segdiff_gui.io.images import IMAGE_SUFFIXES
from segdiff_gui.runner.devices import build_text, remembered_probe
from segdiff_gui.runner.plan import KERAS_MODEL_SUFFIXES, MODEL_SUFFIXES, SAVED_MODEL_FILE
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.ui import view_modes
from segdiff_gui.ui.analysis_controller import AnalysisController
from segdiff_gui.ui.exports import ExportActions
from segdiff_gui.ui.grid_view import ProbabilityGridView
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.inspector import PixelInspector
from segdiff_gui.ui.plain_text import as_html, plain_label
from segdiff_gui.ui.problem_notice import ProblemNotice
from segdiff_gui.ui.recent import RecentFiles
from segdiff_gui.ui.run_panel import RunPanel
from segdiff_gui.ui.session import BundleSession, MatrixSession, Planner
from segdiff_gui.ui.session_controller import SessionController
from segdiff_gui.ui.session_model import SessionModel
from segdiff_gui.ui.stats_panel import StatsPanel
from segdiff_gui.ui.view_modes import ViewMode
from segdiff_gui.ui.view_toolbar import ViewToolbar
from segdiff_gui.ui.walk_keys import KeysOverNumberBoxes
from segdiff_gui.ui.window_layout import GRID_MINIMUM_WIDTH, WindowLayout
from segdiff_gui.ui.your_maps import YourMaps
from segdiff_gui.version import __version__

__all__ = ["MainWindow"]


class MainWindow(QMainWindow):
    def __init__(self, model: InspectionModel, cache: ResultCache) -> None:
        super().__init__()
        self.model = model
        self.cache = cache
        self.setAcceptDrops(True)
        self.setWindowTitle(f"segdiff {__version__}")
        self.grid = ProbabilityGridView(model)
        self.setCentralWidget(self.grid)
        self.toolbar = ViewToolbar(model, self)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)
        self.inspector = PixelInspector(model)
        self.stats = StatsPanel(model)
        self.run_panel = RunPanel()
        self.hover_label = plain_label(QLabel())  # the reference's label
        self.statusBar().addPermanentWidget(self.hover_label)
        # Why runs failed: in the status bar and over the empty views, as the Runs panel says it.
        self.problem_notice = ProblemNotice(model, self.statusBar(), self.grid)
        self.problem_notice.fix_requested.connect(self.run_panel.fix_requested)
        self.run_panel.problem_changed.connect(self.problem_notice.show)
        recent_menu = QMenu("Open &recent", self)
        self.state = SessionModel()  # the session, its request, whether runs are in flight
        self.sessions = SessionController(
            model,
            self.state,
            cache,
            self.run_panel,
            self.notify,
            RecentFiles(recent_menu, self.open_paths),
            self,
        )
        self.analysis = AnalysisController(
            model, self.sessions, self.stats.table, self.notify, self
        )
        self.analysis.diagnosis.measure_requested.connect(
            lambda specs: self.sessions.add_configs(specs, run=True)
        )
        self.sessions.worker_finished.connect(self.analysis.worker_done)
        self.sessions.worker_failed.connect(self.analysis.sweep_not_started)
        self.exports = ExportActions(self, model, self.grid, self._store, self.notify)
        self.your_maps = YourMaps(self, model, self.sessions, self.notify)
        self._build_docks()
        self._build_menus(recent_menu)
        self.grid.pixel_hovered.connect(self._show_hover)
        self.grid.scene().sigMouseClicked.connect(self._user_clicked)
        self.inspector.widened.connect(self._inspector_widened)
        model.events.loaded.connect(self._runs_changed)
        self._pixel_was_chosen_for_user = False
        runs_dock, right_dock = self.docks
        self.layout_policy = WindowLayout(self, runs_dock, right_dock, self.inspector)
        self.layout_policy.restore()

    # the parts, as the window's callers and tests know them --------------------------------
    @property
    def session(self) -> MatrixSession | BundleSession | None:
        return self.sessions.session

    @property
    def worker(self) -> Any:
        return self.sessions.worker

    @property
    def unreadable_reported(self) -> bool:
        return self.sessions.unreadable_reported

    def _store(self) -> Any:
        return self.session.store if self.session is not None else None

    def set_session(self, session: MatrixSession | BundleSession) -> None:
        self.sessions.set_session(session)

    def open_paths(self, paths: list[str]) -> None:
        self.sessions.open_paths(paths)

    def start_runs(self, planner: Planner | None = None) -> None:
        self.sessions.start_runs(planner)

    def notify(self, text: str, milliseconds: int = 8000) -> None:
        self.statusBar().showMessage(text, milliseconds)

    # construction ---------------------------------------------------------------------------
    def _build_docks(self) -> None:
        tabs = QTabWidget()
        tabs.addTab(self.inspector, "Inspector")
        tabs.addTab(self.stats, "Statistics")
        tabs.addTab(self.analysis.diagnosis, "Diagnosis")
        tabs.addTab(self.analysis.layers_panel, "Layers")
        tabs.addTab(self.analysis.sweep_panel, "Test set")
        right = QDockWidget("Pixel and statistics", self)
        right.setObjectName("right-dock")
        right.setWidget(tabs)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, right)
        left = QDockWidget("Runs", self)
        left.setObjectName("runs-dock")
        left.setWidget(self.run_panel)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, left)
        self.tabs = tabs
        self.docks = (left, right)
        # Docks stacked as tabs name themselves above, where a reader looks first.
        self.setTabPosition(Qt.DockWidgetArea.AllDockWidgetAreas, QTabWidget.TabPosition.North)
        # The views are what people came for: however wide the docks' contents (long labels,
        # a wide font), the docks yield before the maps do.
        self.grid.setMinimumWidth(GRID_MINIMUM_WIDTH)

    def _build_menus(self, recent_menu: QMenu) -> None:
        file_menu = self.menuBar().addMenu("&File")
        open_standard = QKeySequence.StandardKey.Open
        self._action(file_menu, "&Open model and images…", self.open_model_dialog, open_standard)
        self._action(file_menu, "Open &SavedModel folder and images…", self.open_saved_model_dialog)
        self._action(file_menu, "Open &bundle…", self.open_bundle_dialog, "Ctrl+Shift+O")
        self.source_action = self._action(
            file_menu, "Compare with its &Keras source…", self.source_dialog
        )
        self.source_action.setToolTip(
            "Your artefact (.tflite, .onnx, OpenVINO IR) beside the Keras model it was "
            "converted from: both models' runs in one study, on the same images and settings"
        )
        file_menu.aboutToShow.connect(
            lambda: self.source_action.setEnabled(self.sessions.compares_with_source())
        )
        file_menu.addMenu(recent_menu)
        file_menu.addSeparator()
        self._action(file_menu, "&Import your maps…", self.your_maps.import_dialog, "Ctrl+I")
        file_menu.addSeparator()
        exports = self.exports
        self._action(file_menu, "Export flip &mask (any run)…", exports.export_mask, "Ctrl+E")
        self._action(file_menu, "Export flipped pixels as &CSV…", exports.export_csv)
        self._action(file_menu, "Export &report (HTML or JSON)…", exports.export_report)
        self._action(file_menu, "Export the &views as PNG…", exports.export_views)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        view_menu = self.menuBar().addMenu("&View")
        for mode in view_modes.VIEW_MODES:
            self._action(view_menu, mode.menu_text, self._show_mode(mode), mode.shortcut)
        view_menu.addSeparator()
        walk = [
            self._action(view_menu, "&Next flip", lambda: self.step_flip(+1), "N"),
            self._action(view_menu, "&Previous flip", lambda: self.step_flip(-1), "P"),
        ]
        # N and P walk from any control but a field where letters are typed.
        self.walk_keys = KeysOverNumberBoxes(walk, self)
        self.walk_keys.watch(self)
        self._action(view_menu, "&Whole image", self.grid.show_whole_image, "Ctrl+0")
        run_menu = self.menuBar().addMenu("&Run")
        self._action(run_menu, "&Run missing", lambda: self.sessions.start_runs(), "Ctrl+R")
        self._action(run_menu, "&Cancel", self.sessions.cancel, "Ctrl+.")
        self._action(run_menu, "&Probe devices", self.sessions.questions.probe_devices)
        run_menu.addSeparator()
        self._action(run_menu, "&Sweep every image", self._sweep_from_menu)
        analysis_menu = self.menuBar().addMenu("&Analysis")
        explain = self.analysis.explain
        self._action(
            analysis_menu, "&Explain the difference (reference vs run)…", explain, "Ctrl+K"
        )
        diagnosis = self.analysis.diagnosis
        self._action(analysis_menu, "&Diagnosis", lambda: self.tabs.setCurrentWidget(diagnosis))
        self._action(analysis_menu, "&Layers: probe reference vs run", self._probe_layers, "Ctrl+L")
        self._action(analysis_menu, "&Reproduce your map…", self.your_maps.reproduce_dialog)
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About segdiff", self.about)

    def _show_mode(self, mode: ViewMode) -> Callable[[], None]:
        """What the View menu's entry for ``mode`` does."""

        def show() -> None:
            self.model.mode = mode

        return show

    def _probe_layers(self) -> None:
        self.tabs.setCurrentWidget(self.analysis.layers_panel)
        self.analysis.probe_layers()

    def _action(
        self,
        menu: QMenu,
        text: str,
        slot: Callable[[], object],
        shortcut: str | QKeySequence.StandardKey | None = None,
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    # reacting -------------------------------------------------------------------------------
    def _runs_changed(self) -> None:
        if self.model.runs and (
            self.model.selected_pixel is None or self._pixel_was_chosen_for_user
        ):
            pixel = self.model.interesting_pixel()
            if pixel is not None:
                self.model.selected_pixel = pixel
                self._pixel_was_chosen_for_user = True  # until the user picks one, keep choosing

    def _user_clicked(self, *_: object) -> None:
        self._pixel_was_chosen_for_user = False
        self.statusBar().clearMessage()  # "flip 4 of 19 at …" is about another pixel now
        self._inspector_to_front()

    def _inspector_to_front(self) -> None:
        """The pixel's values in front where the runs share the inspector's place (a laptop's
        screen): the user asked for a pixel."""
        inspector_dock = self.docks[1]
        if self.tabifiedDockWidgets(inspector_dock):  # the runs may be in front of it
            inspector_dock.raise_()

    def _inspector_widened(self, needed: int) -> None:
        self.layout_policy.widen(needed)

    def _sweep_from_menu(self) -> None:
        self.tabs.setCurrentWidget(self.analysis.sweep_panel)
        self.analysis.sweep()

    def _show_hover(self, row: int, column: int) -> None:
        reference = self.model.reference
        if reference is not None:
            value = format_float32(self.model.plane(reference)[row, column])
            label = printable(reference.label)
            self.hover_label.setText(f"row {row}, column {column}: {value} ({label})")

    def step_flip(self, direction: int) -> None:
        """Walk through the pixels that flip in any run, from the pixel the user chose (else
        from the first), each centred in the views and zoomed in to be seen."""
        if self.model.study is None:
            return
        chosen = None if self._pixel_was_chosen_for_user else self.model.selected_pixel
        step = self.model.flip_step(direction, chosen)
        if step is None:
            self.notify("No pixel flips at this cutoff.", 4000)
            return
        self.model.selected_pixel = (step.row, step.column)
        self._pixel_was_chosen_for_user = False  # walked to: kept as runs arrive
        self.grid.show_pixel(step.row, step.column)
        self._inspector_to_front()
        self.notify(step.sentence())

    # dialogs --------------------------------------------------------------------------------
    def open_bundle_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a bundle", "", "Bundles (*.h5)")
        if path:
            self.open_paths([path])

    def open_model_dialog(self) -> None:
        """A model file, then its images. A SavedModel is a folder, which a file dialog cannot
        pick: its ``saved_model.pb`` is offered and stands for it (or File › Open SavedModel
        folder)."""
        keras = " ".join(f"*{suffix}" for suffix in KERAS_MODEL_SUFFIXES)
        every = " ".join(f"*{suffix}" for suffix in MODEL_SUFFIXES)
        artefacts = ";;".join(
            f"{artefact.title.split(' ', 1)[1]} (*{artefact.suffix})"
            for artefact in ARTEFACT_FORMATS
        )
        model, _ = QFileDialog.getOpenFileName(
            self, "Open a model (a SavedModel by its saved_model.pb)", "",
            f"Models ({every} {SAVED_MODEL_FILE});;Keras models ({keras});;"
            f"SavedModel ({SAVED_MODEL_FILE});;{artefacts}",
        )  # fmt: skip
        if model:
            self._open_with_images(model)

    def source_dialog(self) -> None:
        """The Keras model the open artefact was converted from: its runs go beside."""
        if not self.sessions.compares_with_source():
            self.notify("Open your artefact (.tflite, .onnx or OpenVINO IR) first")
            return
        keras = " ".join(f"*{suffix}" for suffix in KERAS_MODEL_SUFFIXES)
        path, _ = QFileDialog.getOpenFileName(
            self, "The Keras model your artefact was converted from", "", f"Keras models ({keras})"
        )
        if path:
            self.sessions.set_source(path)

    def open_saved_model_dialog(self) -> None:
        """A SavedModel folder, then its images."""
        folder = QFileDialog.getExistingDirectory(self, "Open a SavedModel folder")
        if folder:
            self._open_with_images(folder)

    def _open_with_images(self, model: str) -> None:
        if self.sessions.refuses_model(model):
            return  # said in the window before the images are asked for
        images, _ = QFileDialog.getOpenFileNames(
            self, "Choose images (the first is the target)", "",
            f"Images ({' '.join(f'*{suffix}' for suffix in IMAGE_SUFFIXES)})",
        )  # fmt: skip
        if images:
            self.open_paths([model, *images])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt's name
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt's name
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            self.open_paths(paths)

    def about(self) -> None:
        QMessageBox.about(self, "About segdiff", self.about_text())

    def about_text(self) -> str:
        import pyqtgraph
        import PySide6

        lines = [
            f"<b>segdiff {__version__}</b>",
            "Which pixels of a segmentation model's probability map change with the device, "
            "the batch size, the precision or the next run.",
            f"Qt (PySide6) {PySide6.__version__}, pyqtgraph {pyqtgraph.__version__}",
        ]
        probe = remembered_probe(self.cache.root)
        if probe is None:
            lines.append("TensorFlow: not probed yet on this machine (Run › Probe devices).")
        else:
            # Read from the probe's file: its names are text, in HTML.
            devices = ", ".join(str(d["name"]) for d in probe["devices"])
            lines.append(as_html(f"{build_text(probe['facts'])}; devices: {devices}"))
        return "<br><br>".join(lines)

    # lifetime -------------------------------------------------------------------------------
    def _share_width(self) -> None:
        session = self.state.matrix
        plan = session.plan if session is not None else None
        # An exact run shown, or planned (it comes with a column and a float64 value).
        beside_exact = self.model.loaded.exact is not None or (
            plan is not None and any(run.config.is_exact for run in plan.runs)
        )
        self.layout_policy.share_width(bool(self.model.runs), beside_exact)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self.layout_policy.share_when_shown:
            self.layout_policy.share_when_shown = False
            QTimer.singleShot(0, self._share_width)  # once the docks have their first sizes
        QTimer.singleShot(0, self.grid.show_whole_image)  # once the layout has its sizes
        # A restored or first layout may leave the inspector narrower than its rows.
        QTimer.singleShot(0, lambda: self._inspector_widened(self.inspector.needed_width()))

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.shut_down()
        super().closeEvent(event)

    def shut_down(self) -> None:
        """Cancel a running matrix cleanly: kill the child, wait for every worker thread, save
        the layout. On closing, and on the application quitting without a close (a thread
        still running when Qt's objects go away crashes the process)."""
        self.sessions.cancel_and_wait()
        self.analysis.cancel_layers()  # a layer probe's child is killed; its worker ends
        # A model inspection, device probe or diagnosis may still be running: wait for it.
        WorkerBase.await_workers(30_000)
        self.layout_policy.save()
