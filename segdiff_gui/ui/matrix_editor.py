"""The matrix: devices, batch sizes, repeats and one-knob-at-a-time variants of the engine's
settings, each with a tooltip that says what it changes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.defaults import DEFAULT_REPEATS
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.knobs import KNOBS, KnobRegistry
from segdiff_gui.core.limits import MAX_REPEATS
from segdiff_gui.ui.plain_text import plain_label
from segdiff_gui.ui.session_model import spec_configs

__all__ = ["MatrixEditor"]


class MatrixEditor(QGroupBox):
    changed = Signal()
    problem_said = Signal()  # a new problem is said under the extra lines: bring it in view

    def __init__(
        self,
        parent: QWidget | None = None,
        knobs: KnobRegistry = KNOBS,
        base: RunConfig | None = None,
    ) -> None:
        super().__init__("Matrix", parent)
        # The registry's one-knob-at-a-time variants, and the configuration they vary (a test
        # builds its own registry and configuration type).
        self.knob_registry = knobs
        self.base = base if base is not None else RunConfig()
        self.devices: dict[str, QCheckBox] = {}
        self.device_box = QWidget()
        self.device_layout = QGridLayout(self.device_box)
        self.device_layout.setContentsMargins(0, 0, 0, 0)
        self.batches = QLineEdit("1, 64")
        self.batches.setToolTip(
            "Batch sizes, comma-separated: the target is inferred inside a "
            "batch of each size (filled with the other images)"
        )
        self.context = QComboBox()
        self.context.addItems(["set", "copies"])
        self.context.setToolTip(
            "What fills a batch beside the target: the other images of the "
            "set, or copies of the target"
        )
        self.context.currentIndexChanged.connect(self.changed)
        self.repeats = QSpinBox()
        self.repeats.setRange(1, MAX_REPEATS)
        self.repeats.setValue(DEFAULT_REPEATS)
        self.repeats.setToolTip(
            "Runs of every configuration: on a GPU, repeats show nondeterminism"
        )
        knob_box = QWidget()
        knob_layout = QGridLayout(knob_box)
        knob_layout.setContentsMargins(0, 0, 0, 0)
        self.knobs: dict[str, QCheckBox] = {}
        self._variants = {variant.label: (knob, variant) for knob, variant in knobs.variants()}
        for index, (name, (knob, variant)) in enumerate(self._variants.items()):
            box = QCheckBox(name)
            tip = " ".join(filter(None, (knob.tooltip, variant.tooltip)))
            box.setToolTip(f"{tip} Adds a batch-1 run on every chosen device.")
            box.toggled.connect(self.changed)
            knob_layout.addWidget(box, index // 2, index % 2)
            self.knobs[name] = box
        self.extra = QPlainTextEdit()
        self.extra.setPlaceholderText("more configurations, one per line: xla=on,batch=8")
        self.extra.setToolTip(
            "Any other configuration, one per line as key=value pairs ("
            + knobs.help()
            + "); each runs on every chosen device unless it names one"
        )
        self.extra.setMaximumHeight(56)
        # What the batch sizes or extra lines say wrong (the devices named among them).
        self.extra_problem = plain_label(QLabel())
        self.extra_problem.setWordWrap(True)
        self.extra_problem.setStyleSheet("color: #b00020")
        self.extra_problem.setVisible(False)
        self._problems: list[str] = []
        self._extra_timer = QTimer(self, singleShot=True, interval=600)
        self._extra_timer.timeout.connect(self.changed)
        self.extra.textChanged.connect(self._extra_timer.start)
        form = QFormLayout(self)
        form.addRow("devices", self.device_box)
        form.addRow("batch sizes", self.batches)
        form.addRow("batch context", self.context)
        form.addRow("repeats", self.repeats)
        form.addRow("one knob at a time", knob_box)
        form.addRow("more", self.extra)
        form.addRow("", self.extra_problem)
        self.batches.editingFinished.connect(self.changed)
        self.repeats.valueChanged.connect(self.changed)
        self.set_devices(["cpu"])

    def set_devices(self, names: Sequence[str], checked: Sequence[str] | None = None) -> None:
        for box in self.devices.values():
            box.setParent(None)
        self.devices = {}
        for index, name in enumerate(names):
            box = QCheckBox(name)
            box.setChecked(checked is None or name in checked)
            box.setToolTip(
                "Run on this device (a missing GPU fails its runs; never a "
                "silent fall-back to the CPU)"
            )
            box.toggled.connect(self.changed)
            self.device_layout.addWidget(box, index // 3, index % 3)
            self.devices[name] = box

    def load(self, configs: Sequence[RunConfig], repeats: int) -> None:
        """Show a matrix made elsewhere (the demo's, or the default)."""
        for widget in (*self.knobs.values(), *self.devices.values(), self.repeats):
            widget.blockSignals(True)
        plain = [c for c in configs if self._is_plain(c)]
        self.batches.setText(", ".join(str(b) for b in sorted({c.batch for c in plain})))
        self.repeats.setValue(repeats)
        variants = {self._variant_of(c) for c in configs} - {None}
        for name, box in self.knobs.items():
            box.setChecked(name in variants)
        # What neither the batch sizes nor a variant makes is written out, one per line.
        extra = [c for c in configs if not self._is_plain(c) and self._variant_of(c) is None]
        self.extra.blockSignals(True)
        self.extra.setPlainText("\n".join(dict.fromkeys(self._short_spec(c) for c in extra)))
        self.extra.blockSignals(False)
        devices = sorted({c.device for c in configs}, key=lambda d: (d != "cpu", d))
        self.set_devices(sorted(set(self.devices) | set(devices)), devices)
        for widget in (*self.knobs.values(), *self.devices.values(), self.repeats):
            widget.blockSignals(False)

    def _differences(self, config: RunConfig) -> dict[str, object]:
        """The knobs of ``config`` that differ from the base, beside its device and batch."""
        return {
            knob.name: getattr(config, knob.name)
            for knob in self.knob_registry
            if knob.name not in ("device", "batch")
            and getattr(config, knob.name) != getattr(self.base, knob.name)
        }

    def _is_plain(self, config: RunConfig) -> bool:
        return not self._differences(config)

    def _variant_of(self, config: RunConfig) -> str | None:
        """The checkbox that makes ``config``: a batch-1 run with one knob changed."""
        changed = self._differences(config)
        if config.batch != 1 or len(changed) != 1:
            return None
        ((name, value),) = changed.items()
        for label, (knob, variant) in self._variants.items():
            # A checkbox's run is on every chosen device its variant takes (TF32 off: a GPU).
            off_device = variant.cpu_only if config.device != "cpu" else variant.gpu_only
            if knob.name == name and variant.value == value and not off_device:
                return label
        return None

    def _short_spec(self, config: RunConfig) -> str:
        """``config`` as the extra lines write it: only what differs from the base (devices
        come from the device boxes)."""
        values = {"batch": config.batch, **self._differences(config)}
        full = self.knob_registry.spec(config).split(",")
        return ",".join(item for item in full if item.split("=")[0] in values)

    def extra_configs(self, devices: Sequence[str]) -> list[RunConfig]:
        """The extra lines' configurations on every chosen device (or the one a line names);
        a line that cannot be read is said under the box and left out."""
        configs = []
        for number, line in enumerate(self.extra.toPlainText().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                configs += spec_configs(line, devices, self.base, self.knob_registry)
            except ConfigError as error:
                self._problems.append(f"line {number}: {error}")
        return configs

    def batch_sizes(self) -> list[int]:
        """The sizes the field names; one that is not a batch size is said under the matrix
        (and left out), as the CLI refuses it."""
        sizes = []
        for part in self.batches.text().replace(";", ",").split(","):
            if not part.strip():
                continue
            try:
                size = self.knob_registry.parse(f"batch={part.strip()}")["batch"]
                replace(self.base, batch=size)  # refuses a size out of bounds
            except ConfigError as error:
                self._problems.append(f"batch sizes: {error}")
                continue
            sizes.append(size)
        return sorted(set(sizes)) or [1]

    def configs(self) -> list[RunConfig]:
        """The matrix the controls show; what cannot be read is said under it."""
        self._problems = []
        devices = [name for name, box in self.devices.items() if box.isChecked()] or ["cpu"]
        # The box offers the knob's values: the registry reads its text as --config does.
        context = self.knob_registry.parse(f"context={self.context.currentText()}")["context"]
        configs = [
            replace(self.base, device=d, batch=b, context=context)
            for d in devices
            for b in self.batch_sizes()
        ]
        for name, (knob, variant) in self._variants.items():
            if self.knobs[name].isChecked():
                for device in devices:
                    if variant.gpu_only and device == "cpu":
                        continue  # e.g. TF32 is a GPU mode: the run would equal the plain one
                    if variant.cpu_only and device != "cpu":
                        continue  # emulated TF32 predicts a GPU on the CPU: a GPU runs its own
                    try:
                        # A knob's value is the registry's to check (in RunConfig), as parsed.
                        changes: dict[str, Any] = {knob.name: variant.value}
                        configs.append(replace(self.base, device=device, **changes))
                    except ConfigError as error:  # LiteRT on a GPU: said, not run
                        self._problems.append(f"{name}: {error}")
        configs += self.extra_configs(devices)
        said = "; ".join(self._problems)
        if said != self.extra_problem.text():
            self.extra_problem.setText(said)
            self.extra_problem.setVisible(bool(said))
            if said:
                self.problem_said.emit()
        return list(dict.fromkeys(configs))
