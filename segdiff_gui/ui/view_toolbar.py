"""The toolbar over the views: the cutoff, what the views show (the view modes' table) and at
which scale, the reference, the class of a multi-class map, the image under the maps and the
at-risk shading. Each control is a view of one field of the Qt-free inspection model: it
writes the field and shows it whoever wrote it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QLabel, QToolBar, QWidget
from superqt import QLabeledDoubleSlider

from segdiff_gui.ui import view_modes
from segdiff_gui.ui.cutoff_control import CutoffControl
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.view_modes import ViewMode, view_mode
from segdiff_gui.ui.view_planes import LEVEL_MODES

__all__ = ["ViewToolbar"]

LEVEL_TEXTS = ("shared scale", "scale per view")  # LEVEL_MODES as the box says them


class ViewToolbar(QToolBar):
    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__("View", parent)
        self.model = model
        self.setObjectName("view-toolbar")
        self.setMovable(False)
        self.cutoff = CutoffControl(model)
        self.addWidget(self.cutoff)
        self.addSeparator()
        self.mode_box = QComboBox()
        for mode in view_modes.VIEW_MODES:
            self.mode_box.addItem(mode.name)
            self.mode_box.setItemData(
                self.mode_box.count() - 1, mode.tip, Qt.ItemDataRole.ToolTipRole
            )
        self.mode_box.setToolTip("What the views show")
        self.mode_box.setCurrentText(model.mode.name)
        self.mode_box.currentTextChanged.connect(self._mode_chosen)
        model.events.mode.connect(self._show_mode)
        self.addWidget(QLabel(" view "))
        self.addWidget(self.mode_box)
        self.level_box = QComboBox()
        self.level_box.addItems(list(LEVEL_TEXTS))
        self.level_box.setToolTip(
            "Probability view: 0 to 1 for every run, or each map on its own range, so that a "
            "near-constant map shows more than one colour. Difference and ULP views: one "
            "scale for every run (set by the largest difference of any), or each view scaled "
            "to its own largest difference, so that 1e-7 differences show beside a bfloat16 "
            "run's 1e-2. Per view, each title says its scale."
        )
        self.level_box.setCurrentIndex(LEVEL_MODES.index(model.level_mode))
        self.level_box.currentIndexChanged.connect(self._level_mode_chosen)
        model.events.level_mode.connect(self._show_level_mode)
        self.level_action = self.addWidget(self.level_box)
        self.level_action.setVisible(model.mode.scaled)
        self.reference_box = QComboBox()
        self.reference_box.setToolTip("The run every other run is compared with")
        # Sized to the labels it holds whenever they change: shown empty (before the first
        # run), Qt's default sized it once and cut every label after it.
        self.reference_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.reference_box.currentIndexChanged.connect(self._reference_chosen)
        self.addWidget(QLabel(" reference "))
        self.addWidget(self.reference_box)
        self.class_box = QComboBox()
        self.class_box.setToolTip("Which class of a multi-class map the views show")
        self.class_box.currentIndexChanged.connect(self._class_chosen)
        model.events.class_index.connect(self._show_class)
        # A toolbar shows or hides its widgets through their actions, not the widgets.
        self.class_actions = (self.addWidget(QLabel(" class ")), self.addWidget(self.class_box))
        self.opacity = QLabeledDoubleSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0.0, 1.0)
        self.opacity.setValue(model.image_opacity)
        self.opacity.setMaximumWidth(160)
        self.opacity.setToolTip("Show the input image under the maps")
        self.opacity.valueChanged.connect(self._opacity_chosen)
        model.events.image_opacity.connect(self._show_opacity)
        self.addWidget(QLabel(" image opacity "))
        self.addWidget(self.opacity)
        self.at_risk_box = QCheckBox("at-risk")
        self.at_risk_box.setToolTip(
            "Shade pixels whose class the observed differences could change at this cutoff"
        )
        self.at_risk_box.setChecked(model.at_risk)
        self.at_risk_box.toggled.connect(self._at_risk_chosen)
        model.events.at_risk.connect(self._show_at_risk)
        self.addWidget(self.at_risk_box)
        model.events.loaded.connect(self._runs_changed)
        model.events.reference_key.connect(self._runs_changed)

    # the user's choices, written to the model ---------------------------------------------
    def _mode_chosen(self, name: str) -> None:
        self.model.mode = view_mode(name)

    def _level_mode_chosen(self, index: int) -> None:
        self.model.level_mode = LEVEL_MODES[max(index, 0)]

    def _class_chosen(self, index: int) -> None:
        self.model.class_index = max(index, 0)

    def _opacity_chosen(self, opacity: float) -> None:
        self.model.image_opacity = opacity

    def _at_risk_chosen(self, on: bool) -> None:
        self.model.at_risk = on

    # the model, shown -------------------------------------------------------------------------
    def _show_mode(self, mode: ViewMode) -> None:
        if self.mode_box.currentText() != mode.name:
            self.mode_box.setCurrentText(mode.name)
        self.level_action.setVisible(mode.scaled)

    def _show_level_mode(self) -> None:
        self.level_box.setCurrentIndex(LEVEL_MODES.index(self.model.level_mode))

    def _show_class(self, index: int) -> None:
        if index < self.class_box.count():
            self.class_box.setCurrentIndex(index)

    def _show_at_risk(self, on: bool) -> None:
        self.at_risk_box.setChecked(on)  # no toggle (nor write) when it shows it already

    def _show_opacity(self, opacity: float) -> None:
        if self.opacity.value() != opacity:
            self.opacity.setValue(opacity)

    def _reference_chosen(self, index: int) -> None:
        key = self.reference_box.itemData(index)
        if key:
            self.model.reference_key = key

    def _runs_changed(self) -> None:
        model = self.model
        self.reference_box.blockSignals(True)
        self.reference_box.clear()
        for run in model.runs:
            self.reference_box.addItem(run.label, run.key)
        if model.reference is not None:
            self.reference_box.setCurrentIndex(self.reference_box.findData(model.reference.key))
        self.reference_box.blockSignals(False)
        multiclass = model.multiclass
        for action in self.class_actions:  # sigmoid maps have one class: nothing to choose
            action.setVisible(multiclass)
        if multiclass and self.class_box.count() != model.class_count:
            self.class_box.clear()
            self.class_box.addItems([f"class {i}" for i in range(model.class_count)])
