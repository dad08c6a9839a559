"""The model's settings in the window: how images become its input (divide or multiply,
mean/std, colour, resize), which output is the map and its activation, and trust. The same
settings as ``segdiff run``'s options (part of the cache key in the same way), and the control each
error's fix points at."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from segdiff_gui.core.config import (
    ACTIVATIONS,
    ModelSettings,
    OutputSelection,
    Preprocessing,
    parse_preprocessing,
)
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.runner.arguments import (
    TRUST_PREPROCESS_WARNING,
    TRUST_WARNING,
    preprocessing_function,
)
from segdiff_gui.ui.plain_text import plain_label

__all__ = ["ModelSettingsEditor"]

_ONLY_OUTPUT = "(the only one)"


def _numbers(values: Sequence[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


class ModelSettingsEditor(QWidget):
    """Emits ``changed`` when a setting is edited (text fields when editing finishes)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.divide = QLineEdit()
        self.divide.setPlaceholderText("by dtype (255 for 8-bit)")
        self.divide.setToolTip(
            "Divide the pixels by this in float32, as img.astype(np.float32) / 255.0 does; "
            "empty: by the image's dtype (255 for 8-bit, 65535 for 16-bit, float images as "
            "they are)"
        )
        self.scale = QLineEdit()
        self.scale.setPlaceholderText("none")
        self.scale.setToolTip(
            "Multiply the pixels by float32(this) instead, e.g. 1/255, as Keras's Rescaling "
            "layer does: it rounds differently from dividing (leave 'divide by' empty)"
        )
        self.mean = QLineEdit()
        self.mean.setPlaceholderText("none")
        self.mean.setToolTip("Per-channel mean subtracted after scaling: one value or one each")
        self.std = QLineEdit()
        self.std.setPlaceholderText("none")
        self.std.setToolTip("Per-channel standard deviation divided after the mean")
        self.color = QComboBox()
        self.color.addItems(["keep", "gray", "rgb"])
        self.color.setToolTip(
            "Colour conversion: keep the image's channels, or convert to gray or RGB (an RGBA "
            "image loses its alpha)"
        )
        self.resize_box = QComboBox()
        self.resize_box.addItems(["refuse", "bilinear"])
        self.resize_box.setToolTip(
            "An image of another size than the model's input: refuse it (an error naming both "
            "sizes), or resize it bilinearly"
        )
        self.output = QComboBox()
        self.output.setEditable(True)
        line = self.output.lineEdit()
        assert line is not None  # an editable box has one
        self.output_line = line
        self.output.addItem(_ONLY_OUTPUT)
        self.output.setToolTip("Which output of a model with several is the probability map")
        self.activation = QComboBox()
        self.activation.addItems(list(ACTIVATIONS))
        self.activation.setToolTip(
            "none: the outputs are probabilities already; sigmoid or softmax: segdiff applies "
            "it to raw logits"
        )
        self.function = QLineEdit()
        self.function.setPlaceholderText("none: the steps above")
        self.function.setToolTip(
            "Your own preprocessing, FILE.py:FUNCTION: FUNCTION(image array) gives the model's "
            "input, in place of the steps above. The file's bytes are part of every run's key; "
            "it runs in segdiff's child only when trusted."
        )
        self.trust_function = QCheckBox("trust this function")
        self.trust_function.setToolTip(
            TRUST_PREPROCESS_WARNING[0].upper() + TRUST_PREPROCESS_WARNING[1:] + "."
        )
        self.trust = QCheckBox("trust this model (safe mode off)")
        self.trust.setToolTip(TRUST_WARNING[0].upper() + TRUST_WARNING[1:] + ".")
        self.trust_warning = QLabel(
            "<b>Trusted:</b> the model's own code (Lambda layers, a SavedModel's graph) runs "
            "with your permissions and can read, change or send any of your files."
        )
        self.trust_warning.setWordWrap(True)
        self.trust_warning.setStyleSheet("color: #b00020")
        self.trust_warning.setVisible(False)
        self.problem = plain_label(QLabel())  # errors quote paths and names
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020")
        self.problem.setVisible(False)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("divide by", self.divide)
        form.addRow("or multiply by", self.scale)
        form.addRow("mean", self.mean)
        form.addRow("std", self.std)
        form.addRow("colour", self.color)
        form.addRow("resize", self.resize_box)
        form.addRow("output", self.output)
        form.addRow("activation", self.activation)
        form.addRow("or your function", self.function)
        form.addRow(self.trust_function)
        form.addRow(self.trust)
        form.addRow(self.trust_warning)
        form.addRow(self.problem)
        for line in (self.divide, self.scale, self.mean, self.std, self.function):
            line.editingFinished.connect(self._edited)
        self.trust_function.toggled.connect(self._edited)
        for box in (self.color, self.resize_box, self.activation):
            box.currentIndexChanged.connect(self._edited)
        self.output.activated.connect(self._edited)
        self.output_line.editingFinished.connect(self._edited)
        self.trust.toggled.connect(self._trust_toggled)
        self._shown = ModelSettings()

    # the settings ---------------------------------------------------------------------------
    def settings(self) -> ModelSettings:
        """The settings the controls show; raises ConfigError for text that cannot be read."""
        preprocessing = parse_preprocessing(
            self.scale.text().strip() or None,
            self.mean.text().strip() or None,
            self.std.text().strip() or None,
            self.color.currentText(),
            self.resize_box.currentText(),
            self.divide.text().strip() or None,
        )
        if function := self.function.text().strip():
            if preprocessing != Preprocessing():
                raise ConfigError(
                    "your function replaces divide, multiply, mean, std, colour and resize: "
                    "clear them, or the function"
                )
            try:
                preprocessing = preprocessing_function(function)
            except InputError as error:
                raise ConfigError(str(error)) from None
        output = self.output.currentText().strip()
        return ModelSettings(
            preprocessing,
            OutputSelection(
                output=None if output in ("", _ONLY_OUTPUT) else output,
                activation=ACTIVATIONS[max(self.activation.currentIndex(), 0)],
            ),
            self.trust.isChecked(),
            self.trust_function.isChecked(),
        )

    def load(self, settings: ModelSettings) -> None:
        """Show ``settings`` (a request's), emitting nothing."""
        self._shown = settings
        widgets = (self.divide, self.scale, self.mean, self.std, self.color, self.resize_box,
                   self.output, self.activation, self.trust, self.function,
                   self.trust_function)  # fmt: skip
        for widget in widgets:
            widget.blockSignals(True)
        p: Preprocessing = settings.preprocessing
        named = p.function.rpartition(":")[2] if p.function else ""
        self.function.setText(f"{p.function_file}:{named}" if p.function_file else "")
        self.trust_function.setChecked(settings.trust_preprocess)
        self.divide.setText("" if p.divisor is None else f"{p.divisor:.10g}")
        self.scale.setText("" if p.scale is None else f"{p.scale:.10g}")
        self.mean.setText(_numbers(p.mean))
        self.std.setText(_numbers(p.std))
        self.color.setCurrentText(p.color)
        self.resize_box.setCurrentText(p.resize)
        self.output.setCurrentText(settings.output.output or _ONLY_OUTPUT)
        self.activation.setCurrentText(settings.output.activation)
        self.trust.setChecked(settings.trust_model)
        self.trust_warning.setVisible(settings.trust_model)
        for widget in widgets:
            widget.blockSignals(False)
        self.show_problem("")

    def summary(self) -> str:
        """The settings that are not the defaults, in the controls' words ("defaults")."""
        parts = []
        for name, widget in (
            ("divide by", self.divide),
            ("multiply by", self.scale),
            ("mean", self.mean),
            ("std", self.std),
        ):
            if widget.text().strip():
                parts.append(f"{name} {widget.text().strip()}")
        for name, box, default in (
            ("colour", self.color, "keep"),
            ("resize", self.resize_box, "refuse"),
            ("output", self.output, _ONLY_OUTPUT),
            ("activation", self.activation, "none"),
        ):
            if box.currentText() not in (default, ""):
                parts.append(f"{name} {box.currentText()}")
        if self.trust.isChecked():
            parts.append("trusted")
        return ", ".join(parts) or "defaults"

    def set_outputs(self, names: Sequence[str]) -> None:
        """Offer the model's outputs by name (from the model's inspection)."""
        current = self.output.currentText()
        self.output.blockSignals(True)
        self.output.clear()
        self.output.addItems([_ONLY_OUTPUT] if len(names) <= 1 else list(names))
        if len(names) > 1 and current in ("", _ONLY_OUTPUT):
            # Several outputs and none chosen: say so, rather than "the only one".
            self.output.setCurrentIndex(-1)
            self.output_line.setPlaceholderText(f"choose one of {len(names)}")
        else:
            self.output.setCurrentText(current)
        self.output.blockSignals(False)

    def show_problem(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.setVisible(bool(text))

    # fixes ----------------------------------------------------------------------------------
    def apply_fix(self, fix: str) -> bool:
        """Set the control an error's fix names (``color=rgb``); ``False`` when the fix needs
        the user's choice (which output, what mean): that control gets the focus instead."""
        setting, _, value = fix.partition("=")
        boxes = {"color": self.color, "resize": self.resize_box, "activation": self.activation}
        if setting in boxes and value and boxes[setting].findText(value) >= 0:
            boxes[setting].setCurrentText(value)  # emits changed
            return True
        trusts = {"trust_model": self.trust, "trust_preprocess": self.trust_function}
        if setting in trusts and value == "on":
            trusts[setting].setChecked(True)
            return True
        field = {"output": self.output, "mean": self.mean, "std": self.std, "scale": self.scale}
        if setting in field:
            field[setting].setFocus()
        return False

    # reacting -------------------------------------------------------------------------------
    def _trust_toggled(self, on: bool) -> None:
        self.trust_warning.setVisible(on)
        self._edited()

    def _edited(self) -> None:
        try:
            settings = self.settings()
        except ConfigError as error:
            self.show_problem(str(error))
            return
        self.show_problem("")
        if settings != self._shown:
            self._shown = settings
            self.changed.emit()
