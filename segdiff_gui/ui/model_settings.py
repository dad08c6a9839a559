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
    ModelSettings,
    Preprocessing,
)
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.model_settings import (
    MODEL_SETTINGS,
    SETTINGS,
    STEPS,
    ModelSetting,
    preprocessing_of,
    settings_of,
)
from segdiff_gui.runner.arguments import preprocessing_function
from segdiff_gui.ui.plain_text import plain_label

__all__ = ["ModelSettingsEditor"]

_ONLY_OUTPUT = "(the only one)"
# The form's rows: the registry's order, the model's trust last, beside its warning.
_ROWS = (*(s for s in MODEL_SETTINGS if s.name != "trust_model"), SETTINGS["trust_model"])


def _numbers(values: Sequence[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


class ModelSettingsEditor(QWidget):
    """Emits ``changed`` when a setting is edited (text fields when editing finishes). A
    field for each model setting (core/model_settings.py), of its kind, label and tooltip."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._lines: dict[str, QLineEdit] = {}
        self._boxes: dict[str, QComboBox] = {}
        self._checks: dict[str, QCheckBox] = {}
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
        for setting in _ROWS:
            widget = self._field(setting)
            widget.setToolTip(setting.tooltip)
            if setting.field == "check":
                form.addRow(widget)
            else:
                form.addRow(setting.label, widget)
        form.addRow(self.trust_warning)
        form.addRow(self.problem)
        self.divide, self.scale = self._lines["divide"], self._lines["scale"]
        self.mean, self.std = self._lines["mean"], self._lines["std"]
        self.function = self._lines["preprocess"]
        self.color, self.resize_box = self._boxes["color"], self._boxes["resize"]
        self.output, self.activation = self._boxes["output"], self._boxes["activation"]
        self.trust, self.trust_function = (
            self._checks["trust_model"],
            self._checks["trust_preprocess"],
        )
        self._shown = ModelSettings()

    def _field(self, setting: ModelSetting) -> QWidget:
        """The control of ``setting``'s kind, connected."""
        if setting.field == "check":
            check = self._checks[setting.name] = QCheckBox(setting.label)
            toggled = self._trust_toggled if setting.name == "trust_model" else self._edited
            check.toggled.connect(toggled)
            return check
        if setting.field == "text":
            line = self._lines[setting.name] = QLineEdit()
            line.setPlaceholderText(setting.placeholder)
            line.editingFinished.connect(self._edited)
            return line
        box = self._boxes[setting.name] = QComboBox()
        if setting.field == "output":
            box.setEditable(True)
            edit = box.lineEdit()
            assert edit is not None  # an editable box has one
            self.output_line = edit
            box.addItem(_ONLY_OUTPUT)
            box.activated.connect(self._edited)
            edit.editingFinished.connect(self._edited)
        else:
            box.addItems(list(setting.choices))
            box.currentIndexChanged.connect(self._edited)
        return box

    # the settings ---------------------------------------------------------------------------
    def settings(self) -> ModelSettings:
        """The settings the controls show; raises ConfigError for text that cannot be read."""
        preprocessing = preprocessing_of({step.name: self._text(step.name) for step in STEPS})
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
        values: dict[str, object] = {
            **{name: box.currentText() for name, box in self._boxes.items()},
            **{name: check.isChecked() for name, check in self._checks.items()},
            "output": None if output in ("", _ONLY_OUTPUT) else output,
        }
        return settings_of(preprocessing, values)

    def load(self, settings: ModelSettings) -> None:
        """Show ``settings`` (a request's), emitting nothing."""
        self._shown = settings
        widgets = (*self._lines.values(), *self._boxes.values(), *self._checks.values())
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

    def _text(self, name: str) -> str | None:
        """What the field of setting ``name`` shows: a text field's stripped text (``None``
        when empty), a box's current text, ``None`` for a checkbox."""
        if name in self._lines:
            return self._lines[name].text().strip() or None
        return self._boxes[name].currentText() if name in self._boxes else None

    def summary(self) -> str:
        """The settings that are not the defaults, in the controls' words ("defaults")."""
        parts = []
        for setting in MODEL_SETTINGS:
            text = self._text(setting.name)
            shown = setting.field != "text" or setting.step  # not your function's file
            if shown and text and text not in (setting.default, _ONLY_OUTPUT):
                parts.append(f"{setting.label.removeprefix('or ')} {text}")
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
        box = self._boxes.get(setting)
        if box is not None and SETTINGS[setting].choices and value and box.findText(value) >= 0:
            box.setCurrentText(value)  # emits changed
            return True
        check = self._checks.get(setting)
        if check is not None and value == "on":
            check.setChecked(True)
            return True
        field: QWidget | None = self._lines.get(setting)
        if box is not None and not SETTINGS[setting].choices:  # which output: the user's choice
            field = box
        if field is not None:
            field.setFocus()
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
