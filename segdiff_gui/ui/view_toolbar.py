"""The toolbar over the views: the cutoff, what the views show, the reference, the class of a
multi-class map, the image under the maps and the at-risk shading. It takes the Qt-free
inspection model and keeps itself in step with it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QLabel, QToolBar, QWidget
from superqt import QLabeledDoubleSlider

from segdiff_gui.ui.cutoff_control import CutoffControl
from segdiff_gui.ui.inspection import VIEW_MODES, InspectionModel, ViewMode

__all__ = ["MODE_TIPS", "ViewToolbar"]

MODE_TIPS = {
    "probability": "The probability maps, levels fixed to [0, 1] so runs compare",
    "difference": "Each run minus the reference (blue below, red above), symmetric levels",
    "ulp": "|difference| in float32 ULPs, log scale: 1-ULP changes are visible",
    "flips": "The class of every pixel at the cutoff; flips are highlighted",
}


class ViewToolbar(QToolBar):
    at_risk_toggled = Signal(bool)

    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__("View", parent)
        self.model = model
        self.setObjectName("view-toolbar")
        self.setMovable(False)
        self.cutoff = CutoffControl(model)
        self.addWidget(self.cutoff)
        self.addSeparator()
        self.mode_box = QComboBox()
        for mode in VIEW_MODES:
            self.mode_box.addItem(mode)
            self.mode_box.setItemData(
                self.mode_box.count() - 1, MODE_TIPS[mode], Qt.ItemDataRole.ToolTipRole
            )
        self.mode_box.setToolTip("What the views show")
        self.mode_box.currentTextChanged.connect(model.set_mode)
        model.mode_changed.connect(self._mode_changed)
        self.addWidget(QLabel(" view "))
        self.addWidget(self.mode_box)
        self.level_box = QComboBox()
        self.level_box.addItems(["shared scale", "scale per view"])
        self.level_box.setToolTip(
            "Difference and ULP views: one scale for every run (set by the largest "
            "difference of any), or each view scaled to its own largest difference, so that "
            "1e-7 differences show beside a bfloat16 run's 1e-2 (each title then says its "
            "scale)"
        )
        self.level_box.currentIndexChanged.connect(
            lambda index: model.set_level_mode("per view" if index == 1 else "shared")
        )
        self.level_action = self.addWidget(self.level_box)
        self.level_action.setVisible(False)
        self.reference_box = QComboBox()
        self.reference_box.setToolTip("The run every other run is compared with")
        self.reference_box.currentIndexChanged.connect(self._reference_chosen)
        self.addWidget(QLabel(" reference "))
        self.addWidget(self.reference_box)
        self.class_box = QComboBox()
        self.class_box.setToolTip("Which class of a multi-class map the views show")
        self.class_box.currentIndexChanged.connect(lambda index: model.set_class(max(index, 0)))
        # A toolbar shows or hides its widgets through their actions, not the widgets.
        self.class_actions = (self.addWidget(QLabel(" class ")), self.addWidget(self.class_box))
        self.opacity = QLabeledDoubleSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0.0, 1.0)
        self.opacity.setValue(0.0)
        self.opacity.setMaximumWidth(160)
        self.opacity.setToolTip("Show the input image under the maps")
        self.opacity.valueChanged.connect(model.set_image_opacity)
        self.addWidget(QLabel(" image opacity "))
        self.addWidget(self.opacity)
        self.at_risk_box = QCheckBox("at-risk")
        self.at_risk_box.setToolTip(
            "Shade pixels whose class the observed differences could change at this cutoff"
        )
        self.at_risk_box.toggled.connect(self.at_risk_toggled)
        self.addWidget(self.at_risk_box)
        model.runs_changed.connect(self._runs_changed)
        model.reference_changed.connect(self._runs_changed)

    def show_mode(self, mode: ViewMode) -> None:
        """Switch the views to ``mode`` (the View menu and Ctrl+1…4 call this)."""
        self.model.set_mode(mode)

    def _mode_changed(self, mode: str) -> None:
        if self.mode_box.currentText() != mode:
            self.mode_box.setCurrentText(mode)
        self.level_action.setVisible(mode in ("difference", "ulp"))

    def _reference_chosen(self, index: int) -> None:
        key = self.reference_box.itemData(index)
        if key:
            self.model.set_reference(key)

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
