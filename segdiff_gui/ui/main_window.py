"""The segdiff-gui main window: views in the middle, the cutoff and view controls on top,
the inspector and statistics on the right, the matrix and its progress on the left."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QIcon,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QTabWidget,
    QToolBar,
)
from superqt import QLabeledDoubleSlider
from superqt.utils import WorkerBase, thread_worker

from segdiff_gui import __version__
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.progress import AllDone, Message
from segdiff_gui.io.html_report import write_html_report
from segdiff_gui.io.images import collect_images
from segdiff_gui.io.masks import write_mask
from segdiff_gui.io.reports import report_data, write_json_report
from segdiff_gui.io.tables import write_pixel_csv
from segdiff_gui.runner.devices import gpu_names, inspect_model, probe_devices, remembered_probe
from segdiff_gui.runner.matrices import default_configs
from segdiff_gui.runner.plan import check_model_path
from segdiff_gui.storage.bundle import BundleReader, is_bundle
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.ui.analysis_controller import AnalysisController
from segdiff_gui.ui.cutoff_control import CutoffControl
from segdiff_gui.ui.grid_view import ProbabilityGridView
from segdiff_gui.ui.inspection import VIEW_MODES, InspectionModel
from segdiff_gui.ui.inspector import PixelInspector
from segdiff_gui.ui.run_panel import RunPanel
from segdiff_gui.ui.session import BundleSession, MatrixSession, Planner
from segdiff_gui.ui.stats_panel import StatsPanel
from segdiff_gui.ui.widgets import thumbnail
from segdiff_gui.ui.worker import MatrixWorker

__all__ = ["MainWindow"]

_MODE_TIPS = {
    "probability": "The probability maps, levels fixed to [0, 1] so runs compare",
    "difference": "Each run minus the reference (blue below, red above), symmetric levels",
    "ulp": "|difference| in float32 ULPs, log scale: 1-ULP changes are visible",
    "flips": "The class of every pixel at the cutoff; flips are highlighted",
}
# pixels: room for a few runs side by side whatever the docks' contents ask for, in a window
# that still fits a 1024-pixel-wide screen
_GRID_MINIMUM_WIDTH = 320
# pixels: a first window narrower than this puts the runs in a tab behind the inspector
_SIDE_BY_SIDE_WIDTH = 1400


class MainWindow(QMainWindow):
    def __init__(self, model: InspectionModel, cache: ResultCache) -> None:
        super().__init__()
        self.model = model
        self.cache = cache
        self.session: MatrixSession | BundleSession | None = None
        # Some run could not be read (and was said so): the app then exits with code 2.
        self.unreadable_reported = False
        self._inspection: Any = None
        self._probe: Any = None
        self._pixel_was_chosen_for_user = False
        self._thumbnails: list[QIcon] = []
        self._thumbnails_for: list[str] = []
        self.setAcceptDrops(True)
        self.worker: MatrixWorker | None = None
        self.setWindowTitle(f"segdiff {__version__}")
        self.grid = ProbabilityGridView(model)
        self.setCentralWidget(self.grid)
        self.cutoff = CutoffControl(model)
        self.inspector = PixelInspector(model)
        self.stats = StatsPanel(model)
        self.run_panel = RunPanel()
        self.analysis = AnalysisController(self)
        self._build_toolbar()
        self._build_docks()
        self._build_menus()
        self.hover_label = QLabel()
        self.statusBar().addPermanentWidget(self.hover_label)
        self.grid.pixel_hovered.connect(self._show_hover)
        self.grid.scene().sigMouseClicked.connect(self._user_clicked)
        self.run_panel.run_requested.connect(self.start_runs)
        self.run_panel.editor.changed.connect(self._matrix_edited)
        self.run_panel.target_chosen.connect(self._target_chosen)
        self.run_panel.cancel_requested.connect(self.cancel_runs)
        model.runs_changed.connect(self._runs_changed)
        self._flip_cursor = -1
        self._restore_layout()

    # construction ---------------------------------------------------------------------------
    def _build_toolbar(self) -> None:
        bar = QToolBar("View")
        bar.setObjectName("view-toolbar")
        bar.setMovable(False)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        bar.addWidget(self.cutoff)
        bar.addSeparator()
        self.mode_box = QComboBox()
        for mode in VIEW_MODES:
            self.mode_box.addItem(mode)
            self.mode_box.setItemData(
                self.mode_box.count() - 1, _MODE_TIPS[mode], Qt.ItemDataRole.ToolTipRole
            )
        self.mode_box.setToolTip("What the views show")
        self.mode_box.currentTextChanged.connect(self.model.set_mode)
        bar.addWidget(QLabel(" view "))
        bar.addWidget(self.mode_box)
        self.reference_box = QComboBox()
        self.reference_box.setToolTip("The run every other run is compared with")
        self.reference_box.currentIndexChanged.connect(self._reference_chosen)
        bar.addWidget(QLabel(" reference "))
        bar.addWidget(self.reference_box)
        self.class_box = QComboBox()
        self.class_box.setToolTip("Which class of a multi-class map the views show")
        self.class_box.currentIndexChanged.connect(
            lambda index: self.model.set_class(max(index, 0))
        )
        # A toolbar shows or hides its widgets through their actions, not the widgets.
        self.class_actions = (bar.addWidget(QLabel(" class ")), bar.addWidget(self.class_box))
        self.opacity = QLabeledDoubleSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0.0, 1.0)
        self.opacity.setValue(0.0)
        self.opacity.setMaximumWidth(160)
        self.opacity.setToolTip("Show the input image under the maps")
        self.opacity.valueChanged.connect(self.model.set_image_opacity)
        bar.addWidget(QLabel(" image opacity "))
        bar.addWidget(self.opacity)
        self.at_risk_box = QCheckBox("at-risk")
        self.at_risk_box.setToolTip(
            "Shade pixels whose class the observed differences could change at this cutoff"
        )
        self.at_risk_box.toggled.connect(self._toggle_at_risk)
        bar.addWidget(self.at_risk_box)

    def _build_docks(self) -> None:
        tabs = QTabWidget()
        tabs.addTab(self.inspector, "Inspector")
        tabs.addTab(self.stats, "Statistics")
        tabs.addTab(self.analysis.diagnosis, "Diagnosis")
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
        self.grid.setMinimumWidth(_GRID_MINIMUM_WIDTH)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self._action(
            file_menu,
            "&Open model and images…",
            self.open_model_dialog,
            QKeySequence.StandardKey.Open,
        )
        self._action(file_menu, "Open &bundle…", self.open_bundle_dialog, "Ctrl+Shift+O")
        self.recent_menu = file_menu.addMenu("Open &recent")
        self._fill_recent()
        file_menu.addSeparator()
        self._action(file_menu, "Export flip &mask (any run)…", self.export_mask, "Ctrl+E")
        self._action(file_menu, "Export flipped pixels as &CSV…", self.export_csv)
        self._action(file_menu, "Export &report (HTML or JSON)…", self.export_report)
        self._action(file_menu, "Export the &views as PNG…", self.export_views)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        view_menu = self.menuBar().addMenu("&View")
        for index, mode in enumerate(VIEW_MODES, start=1):
            self._action(
                view_menu,
                f"&{mode.capitalize()}",
                lambda m=mode: self.mode_box.setCurrentText(m),
                f"Ctrl+{index}",
            )
        view_menu.addSeparator()
        self._action(view_menu, "&Next flip", lambda: self.step_flip(+1), "N")
        self._action(view_menu, "&Previous flip", lambda: self.step_flip(-1), "P")
        self._action(view_menu, "&Whole image", self.grid.show_whole_image, "Ctrl+0")
        run_menu = self.menuBar().addMenu("&Run")
        self._action(run_menu, "&Run missing", lambda: self.start_runs(), "Ctrl+R")
        self._action(run_menu, "&Cancel", self.cancel_runs, "Ctrl+.")
        self._action(run_menu, "&Probe devices", self.probe_devices)
        run_menu.addSeparator()
        self._action(run_menu, "&Sweep every image", self._sweep_from_menu)
        analysis_menu = self.menuBar().addMenu("&Analysis")
        self._action(
            analysis_menu, "&Explain the difference (reference vs run)…", self.analysis.explain,
            "Ctrl+K",
        )  # fmt: skip
        self._action(
            analysis_menu, "&Diagnosis", lambda: self.tabs.setCurrentWidget(self.analysis.diagnosis)
        )
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About segdiff", self.about)

    def _action(self, menu: object, text: str, slot: object, shortcut: object = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))  # type: ignore[arg-type]
        action.triggered.connect(slot)  # type: ignore[arg-type]
        menu.addAction(action)  # type: ignore[attr-defined]
        return action

    # reacting -------------------------------------------------------------------------------
    def _runs_changed(self) -> None:
        self.reference_box.blockSignals(True)
        self.reference_box.clear()
        for run in self.model.runs:
            self.reference_box.addItem(run.label, run.key)
        reference = self.model.reference
        if reference is not None:
            self.reference_box.setCurrentIndex(self.reference_box.findData(reference.key))
        self.reference_box.blockSignals(False)
        multiclass = self.model.multiclass
        for action in self.class_actions:  # sigmoid maps have one class: nothing to choose
            action.setVisible(multiclass)
        if multiclass and self.class_box.count() != self.model.class_count:
            self.class_box.clear()
            self.class_box.addItems([f"class {i}" for i in range(self.model.class_count)])
        if self.model.runs and (
            self.model.selected_pixel is None or self._pixel_was_chosen_for_user
        ):
            self._select_first_interesting_pixel()

    def _select_first_interesting_pixel(self) -> None:
        """Open on the story: the pixel that flips in most runs, else the largest difference."""
        study = self.model.study
        if study is None:
            return
        shape = study.reference.probabilities.shape
        # Flips are sparse: count them by position rather than adding whole-map masks.
        flipped = [np.flatnonzero(self.model.flips(run)) for run in study.others]
        positions, counts = np.unique(
            np.concatenate([np.empty(0, np.intp), *flipped]), return_counts=True
        )
        if positions.size:  # the first of the positions that flip in most runs
            row, column = np.unravel_index(int(positions[np.argmax(counts)]), shape[:2])
        else:
            largest = max(study.rows(), key=lambda row: row["max_abs"], default=None)
            location = largest["max_location"] if largest else None
            row, column = location[:2] if location else (shape[0] // 2, shape[1] // 2)
        self.model.select_pixel(int(row), int(column))
        self._pixel_was_chosen_for_user = True  # until the user picks one, keep choosing

    def _user_clicked(self, *_: object) -> None:
        self._pixel_was_chosen_for_user = False
        self.statusBar().clearMessage()  # "flip 4 of 19 at …" is about another pixel now
        inspector_dock = self.docks[1]
        if self.tabifiedDockWidgets(inspector_dock):  # the runs may be in front of it
            inspector_dock.raise_()

    def _reference_chosen(self, index: int) -> None:
        key = self.reference_box.itemData(index)
        if key:
            self.model.set_reference(key)

    def _toggle_at_risk(self, on: bool) -> None:
        self.grid.show_at_risk = on
        self.grid.refresh_overlays()

    def _show_hover(self, row: int, column: int) -> None:
        reference = self.model.reference
        if reference is None:
            return
        value = self.model.plane(reference)[row, column]
        self.hover_label.setText(
            f"row {row}, column {column}: {format_float32(value)} ({reference.label})"
        )

    def step_flip(self, direction: int) -> None:
        """Walk through the pixels that flip in any run, centring the views on each."""
        study = self.model.study
        if study is None:
            return
        rows, columns = np.nonzero(study.any_flips())
        if rows.size == 0:
            self.statusBar().showMessage("No pixel flips at this cutoff.", 4000)
            return
        self._flip_cursor = (self._flip_cursor + direction) % rows.size
        row, column = int(rows[self._flip_cursor]), int(columns[self._flip_cursor])
        self.model.select_pixel(row, column)
        self.grid.centre_on(row, column)
        self.statusBar().showMessage(
            f"flip {self._flip_cursor + 1} of {rows.size} at row {row}, column {column}", 4000
        )

    # what is shown --------------------------------------------------------------------------
    def _sweep_from_menu(self) -> None:
        self.tabs.setCurrentWidget(self.analysis.sweep_panel)
        self.analysis.sweep()

    def set_session(self, session: MatrixSession | BundleSession) -> None:
        """Look at a matrix (cached runs at once, the rest on request) or at a bundle."""
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(30_000)
        self.session = session
        self.analysis.session_changed()
        self.model.selected_pixel = None
        self.model.focus_key = None
        if isinstance(session, BundleSession):
            groups = session.show(self.model)
            shown = {run.key: run.label for run in self.model.runs}
            self.run_panel.set_planned(shown, set(shown))
            self.run_panel.set_source(
                f"bundle {session.bundle.path}: {groups} model/image group(s), read-only"
            )
            self.run_panel.set_read_only(True)
            self._remember(str(session.bundle.path))
            self.report_unreadable([*session.damaged, *self.model.unreadable])
            return
        self.run_panel.set_read_only(False)
        self.run_panel.editor.setEnabled(True)
        probe = remembered_probe(session.cache.root)  # no TensorFlow: what is known already
        gpus = gpu_names(probe) if probe else []
        self.run_panel.editor.set_devices(["cpu", *gpus])
        self.run_panel.editor.load(session.configs_for(gpus), session.repeats)
        self._replan()
        self._inspect_model(session)
        self._remember(" ".join(map(str, [session.model_path, *session.images])))

    def probe_devices(self) -> None:
        """Ask a TensorFlow child which devices it sees; the matrix editor offers them."""
        self.statusBar().showMessage("probing devices (TensorFlow in a child)…")
        worker = thread_worker(probe_devices, start_thread=False)(self.cache.root, fresh=True)
        worker.returned.connect(self._devices_probed)
        worker.errored.connect(lambda error: self.statusBar().showMessage(str(error), 10000))
        self._probe = worker
        worker.start()

    def _devices_probed(self, probe: dict[str, Any]) -> None:
        names = ["cpu", *gpu_names(probe)]
        editor = self.run_panel.editor
        chosen = [name for name, box in editor.devices.items() if box.isChecked()]
        editor.set_devices(names, chosen)
        self.statusBar().showMessage(f"devices TensorFlow sees: {', '.join(names)}", 10000)

    def _inspect_model(self, session: MatrixSession) -> None:
        """Ask a child what the model takes and gives (unless this model file was asked about
        before); the answer arrives on the GUI thread."""
        self.run_panel.model_info.setText("inspecting the model (TensorFlow in a child)…")
        model_hash = session.plan.model_hash if session.plan else None
        worker = thread_worker(inspect_model, start_thread=False)(
            session.model_path, state_dir=session.cache.root, model_hash=model_hash
        )
        worker.returned.connect(self.run_panel.show_model)
        worker.errored.connect(lambda error: self.run_panel.model_info.setText(str(error)))
        self._inspection = worker  # keep it alive, and wait for it on close
        worker.start()

    def _target_chosen(self, index: int) -> None:
        session = self.session
        if isinstance(session, MatrixSession) and session.plan:
            self.show_target(session.plan.images[index].name)

    def show_target(self, name: str) -> None:
        """Show the runs on image ``name`` (the matrix is replanned on it)."""
        session = self.session
        if isinstance(session, MatrixSession) and self.worker is None:
            session.target = name
            self._replan()

    def _matrix_edited(self) -> None:
        """The user changed the matrix: plan it, and show what of it is cached."""
        if not isinstance(self.session, MatrixSession) or self.worker is not None:
            return
        editor = self.run_panel.editor
        self.session.configs_for = lambda _gpus: editor.configs()
        self.session.repeats = editor.repeats.value()
        self._replan()

    def _replan(self) -> None:
        session = self.session
        assert isinstance(session, MatrixSession)
        plan = session.plan_now()
        self.run_panel.set_source(
            f"{Path(session.model_path).name} on {plan.images[plan.target].name} "
            f"({len(plan.images)} images); cache {session.cache.root}"
        )
        self.run_panel.set_planned(
            {run.key: run.label for run in plan.runs}, {run.key for run in plan.cached}
        )
        names = [image.name for image in plan.images]
        if self._thumbnails_for != names:
            self._thumbnails = [thumbnail(Path(image.path)) for image in plan.images]
            self._thumbnails_for = names
        self.run_panel.set_images(names, self._thumbnails, plan.target)
        cached = [session.cache.read_run(run.key, with_map=False) for run in plan.cached]
        self.report_unreadable(plan.damaged, " (to be computed again)")
        self.model.selected_pixel = None
        self.model.set_runs(session.cache, cached)
        self.report_unreadable(self.model.unreadable)

    def report_unreadable(self, damaged: Sequence[InputError], outcome: str = "") -> None:
        """Runs that could not be read: said in the window (the others are shown) and, for a
        window started from a terminal, one line each on stderr."""
        if not damaged:
            return
        self.unreadable_reported = True
        for entry in damaged:
            print(f"segdiff-gui: {entry}{outcome}", file=sys.stderr)
        more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
        self.statusBar().showMessage(f"Unreadable: {damaged[0]}{more}{outcome}", 30000)

    def open_paths(self, paths: list[str]) -> None:
        """Open dropped or chosen files: a bundle, or a model followed by images."""
        try:
            bundles = [p for p in paths if Path(p).is_file() and is_bundle(Path(p))]
            if bundles:
                self.set_session(BundleSession(BundleReader(bundles[0])))
                return
            model = check_model_path(paths[0])
            images = collect_images(paths[1:])
        except (InputError, IndexError) as error:
            # Said in the window, not in a modal dialog: a drop of the wrong file is no crisis.
            message = str(error) or "give a model followed by its images, or a bundle"
            self.statusBar().showMessage(f"Cannot open that: {message}", 15000)
            self.run_panel.status.setText(message)
            return
        self.set_session(MatrixSession(model, images, self.cache, default_configs))
        self.start_runs()

    def _remember(self, entry: str) -> None:
        settings = QSettings("segdiff", "segdiff-gui")
        recent = [entry] + [e for e in (settings.value("recent") or []) if e != entry]
        settings.setValue("recent", recent[:8])
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for entry in QSettings("segdiff", "segdiff-gui").value("recent") or []:
            action = self.recent_menu.addAction(entry)
            action.triggered.connect(lambda _=False, e=entry: self.open_paths(e.split(" ")))

    def open_bundle_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a bundle", "", "Bundles (*.h5)")
        if path:
            self.open_paths([path])

    def open_model_dialog(self) -> None:
        model, _ = QFileDialog.getOpenFileName(
            self, "Open a model", "", "Keras models (*.keras *.h5)"
        )
        if not model:
            return
        images, _ = QFileDialog.getOpenFileNames(
            self,
            "Choose images (the first is the target)",
            "",
            "Images (*.png *.jpg *.tif *.tiff *.npy)",
        )
        if images:
            self.open_paths([model, *images])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt's name
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt's name
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            self.open_paths(paths)

    # running --------------------------------------------------------------------------------
    def start_runs(self, planner: Planner | None = None) -> None:
        """Run what the matrix (or, with ``planner``, e.g. a sweep) still lacks."""
        if not isinstance(self.session, MatrixSession) or self.worker is not None:
            return
        session = self.session
        self.worker = MatrixWorker(planner or session.plan_with_devices)
        self.worker.message.connect(self._on_message)
        self.worker.failed.connect(lambda text: self.run_panel.status.setText(text))
        self.worker.finished.connect(self._worker_done)
        self.run_panel.set_running(True)
        self.run_panel.editor.setEnabled(False)
        self.worker.start()

    def _on_message(self, message: Message) -> None:
        self.run_panel.show_message(message)
        if isinstance(self.session, MatrixSession):
            self.session.absorb(self.model, message)
        if isinstance(message, AllDone):
            self.statusBar().showMessage(self.run_panel.status.text(), 8000)

    def _worker_done(self) -> None:
        self.run_panel.set_running(False)
        self.run_panel.editor.setEnabled(True)
        self.worker = None
        self.analysis.worker_done()

    def cancel_runs(self) -> None:
        if self.worker is not None:
            self.worker.cancel()

    # exports and dialogs --------------------------------------------------------------------
    def export_mask(self) -> None:
        study = self.model.study
        if study is None or not study.others:
            QMessageBox.information(self, "Export flip mask", "There is no run to compare.")
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export flip mask", "flips.png", "Images (*.png *.tif);;NumPy (*.npy)"
        )
        if path:
            write_mask(path, study.any_flips())
            self.statusBar().showMessage(f"wrote {path}", 6000)

    def _save_path(self, title: str, default: str, filters: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self, title, default, filters)
        return path

    def export_csv(self) -> None:
        study, other = self.model.study, self.model.focus_run
        if study is None or other is None:
            QMessageBox.information(self, "Export CSV", "There is no run to compare.")
            return
        path = self._save_path("Export flipped pixels", "flips.csv", "CSV (*.csv)")
        if path:
            count = write_pixel_csv(
                path, study, other, include_at_risk=self.at_risk_box.isChecked()
            )
            self.statusBar().showMessage(
                f"wrote {count:,} pixels of {other.label} vs {study.reference.label} to {path}",
                8000,
            )

    def export_report(self) -> None:
        study = self.model.study
        if study is None:
            return
        path = self._save_path(
            "Export report", "segdiff-report.html", "HTML (*.html);;JSON (*.json)"
        )
        if not path:
            return
        if self.session is None:
            return
        store = self.session.store
        provenance = {
            run.key: store.read_run(run.key, with_map=False).provenance for run in study.runs
        }
        first = self.model.records[study.reference.key]
        data = report_data(
            study, provenance, {"model": first.model_name, "image": first.target_name}
        )
        if path.lower().endswith(".json"):
            write_json_report(path, data)
        else:
            write_html_report(path, data, study, self.model.image)
        self.statusBar().showMessage(f"wrote {path}", 6000)

    def export_views(self) -> None:
        path = self._save_path("Export the views", "segdiff-views.png", "PNG (*.png)")
        if path:
            self.grid.grab().save(path)
            self.statusBar().showMessage(f"wrote {path}", 6000)

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
            lines.append(
                "TensorFlow: not probed yet on this machine (run the matrix, or "
                "<tt>segdiff devices</tt>)."
            )
        else:
            facts = probe["facts"]
            cuda = (
                f"CUDA {facts['cuda_version']}, cuDNN {facts['cudnn_version']} (build)"
                if facts.get("cuda_build")
                else "CPU-only build"
            )
            devices = ", ".join(d["name"] for d in probe["devices"])
            lines.append(
                f"TensorFlow {facts['tf_version']}, Keras {facts['keras_version']}, "
                f"{cuda}; devices: {devices}"
            )
        return "<br><br>".join(lines)

    # lifetime -------------------------------------------------------------------------------
    def _restore_layout(self) -> None:
        settings = QSettings("segdiff", "segdiff-gui")
        geometry = settings.value("geometry")
        state = settings.value("state")
        if not (isinstance(geometry, QByteArray) and self.restoreGeometry(geometry)):
            self._first_geometry()
        self._share_width_when_shown = not (
            isinstance(state, QByteArray) and self.restoreState(state)
        )

    def _first_geometry(self) -> None:
        """Most of the screen, centred: the maps need the room (1400 × 860 with no screen)."""
        screen = QGuiApplication.primaryScreen()
        if screen is None:
            self.resize(1400, 860)
            return
        available = screen.availableGeometry()
        size = available.size() * 0.92
        self.resize(size)
        self.move(available.center() - self.rect().center())

    def _share_width(self) -> None:
        """Share the window's width the first time it is shown: a fifth to the runs, to the
        inspector the width of its columns (at most two fifths), the rest to the maps. Docks
        cannot shrink below their contents; the maps' minimum width then decides.

        A window narrower than :data:`_SIDE_BY_SIDE_WIDTH` (a laptop screen) would leave the
        maps a third of it: the runs then share the inspector's place, as a tab behind it."""
        width = self.width()
        runs, right = self.docks
        frame = right.width() - self.inspector.width()  # the dock's and the tabs' margins
        wanted = self.inspector.sizeHint().width() + frame
        if width < _SIDE_BY_SIDE_WIDTH:
            self.tabifyDockWidget(right, runs)
            (right if self.model.runs else runs).raise_()  # no run yet: show them coming
            self.resizeDocks([right], [min(wanted, width // 2)], Qt.Orientation.Horizontal)
        else:
            if self.tabifiedDockWidgets(right):  # stacked before, on a narrower window
                self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, runs)
            self.resizeDocks(
                [runs, right], [width // 5, min(wanted, width * 2 // 5)], Qt.Orientation.Horizontal
            )

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._share_width_when_shown:
            self._share_width_when_shown = False
            QTimer.singleShot(0, self._share_width)  # once the docks have their first sizes
        QTimer.singleShot(0, self.grid.show_whole_image)  # once the layout has its sizes

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        """Cancel a running matrix cleanly: kill the child, wait for the worker, then close."""
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(30_000)
        # A model inspection or device probe may still be asking its child: wait for it.
        WorkerBase.await_workers(30_000)
        settings = QSettings("segdiff", "segdiff-gui")
        settings.setValue("geometry", self.saveGeometry())
        settings.setValue("state", self.saveState())
        super().closeEvent(event)
