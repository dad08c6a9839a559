"""The cutoff: a slider and a spin box with six decimals, kept in sync. Dragging is throttled,
so the views recompute the flips for the latest position only, never a backlog. On a
multi-class (softmax) map argmax decides each class: the cutoff is then disabled, and says
why."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QWidget
from superqt import QDoubleSlider
from superqt.utils import qthrottled

from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["CutoffControl"]

DECIMALS = 6
_SLIDER_TIP = (
    "Class cutoff for sigmoid maps: a pixel is foreground where p >= cutoff. Flips update "
    "while you drag."
)
_SPIN_TIP = "Exact cutoff, to six decimals (e.g. 0.550000)"
_ARGMAX_TIP = (
    "No cutoff applies to this multi-class (softmax) map: each pixel's class is its argmax, "
    "the most likely class. The cutoff decides the class of sigmoid (binary) maps."
)


class CutoffControl(QWidget):
    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        # superqt leaves QDoubleSlider.__init__ unannotated
        self.slider = QDoubleSlider(Qt.Orientation.Horizontal)  # type: ignore[no-untyped-call]
        self.slider.setRange(0.0, 1.0)
        self.slider.setValue(model.cutoff)
        self.spin = QDoubleSpinBox()
        self.spin.setDecimals(DECIMALS)
        self.spin.setRange(0.0, 1.0)
        self.spin.setSingleStep(10.0**-DECIMALS * 100)
        self.spin.setValue(model.cutoff)
        # Applied on Enter, on leaving the box, or on a step; not at every key, where the
        # "0" of "0.55" would apply at once and rewrite the text under the cursor.
        self.spin.setKeyboardTracking(False)
        self.count = QLabel()
        self.count.setMinimumWidth(160)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("cutoff"))
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.spin)
        layout.addWidget(self.count)
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)
        model.events.cutoff.connect(self._show)
        model.events.loaded.connect(lambda: self._show(model.cutoff))
        model.events.reference_key.connect(lambda: self._show(model.cutoff))
        self._apply = qthrottled(self._apply_now, timeout=40, leading=True)
        self._offer(decides=True)

    def _offer(self, decides: bool) -> None:
        """The cutoff offered where it decides the classes; else disabled, saying why."""
        for widget, tip in ((self.slider, _SLIDER_TIP), (self.spin, _SPIN_TIP)):
            widget.setEnabled(decides)
            widget.setToolTip(tip if decides else _ARGMAX_TIP)

    def _from_slider(self, value: float) -> None:
        self.spin.blockSignals(True)
        self.spin.setValue(value)
        self.spin.blockSignals(False)
        self._apply(value)

    def _from_spin(self, value: float) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(value)
        self.slider.blockSignals(False)
        self._apply_now(value)

    def _apply_now(self, value: float) -> None:
        self.model.cutoff = round(float(value), DECIMALS)

    def _show(self, cutoff: float) -> None:
        for widget in (self.slider, self.spin):
            widget.blockSignals(True)
            widget.setValue(cutoff)
            widget.blockSignals(False)
        study = self.model.study
        self._offer(decides=not self.model.multiclass)
        if study is None:
            self.count.setText("")
            return
        counts = [study.flip_count(run) for run in study.others]
        flips, worst = sum(counts), max(counts, default=0)
        rule = "argmax" if self.model.multiclass else f"p ≥ {format_float32(cutoff)}"
        self.count.setText(f"{flips:,} flips in all ({worst:,} at most), {rule}")
