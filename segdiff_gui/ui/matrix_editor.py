"""The matrix: devices, batch sizes, repeats and one-knob-at-a-time variants of the engine's
settings, each with a tooltip that says what it changes."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from segdiff_gui.core.config import RunConfig

__all__ = ["KNOBS", "MatrixEditor"]

# name, tooltip, the variant of a batch-1 run it adds
KNOBS: tuple[tuple[str, str, dict[str, object]], ...] = (
    (
        "determinism",
        "Op determinism (tf.config.experimental.enable_op_determinism): repeats on "
        "a GPU agree bit for bit, usually slower. Own process.",
        {"determinism": True},
    ),
    (
        "TF32 off",
        "TensorFloat-32 off on Ampere+ GPUs: float32 matmuls and convolutions keep "
        "their full mantissa (TF's default is on). No effect on CPUs.",
        {"tf32": False},
    ),
    (
        "oneDNN off",
        "TF_ENABLE_ONEDNN_OPTS=0: CPU kernels without oneDNN's reordered arithmetic. Own process.",
        {"onednn": False},
    ),
    ("1 thread", "One intra-op thread: the CPU sums in one order. Own process.", {"threads": 1}),
    (
        "XLA",
        "Compile the forward pass with XLA (jit_compile=True): fused kernels round differently.",
        {"xla": True},
    ),
    (
        "bfloat16",
        "mixed_bfloat16 policy: layers compute in bfloat16 (8-bit mantissa).",
        {"precision": "mixed_bfloat16"},
    ),
    (
        "float16",
        "mixed_float16 policy: layers compute in float16 (10-bit mantissa).",
        {"precision": "mixed_float16"},
    ),
)


class MatrixEditor(QGroupBox):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Matrix", parent)
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
        self.repeats.setRange(1, 50)
        self.repeats.setValue(2)
        self.repeats.setToolTip(
            "Runs of every configuration: on a GPU, repeats show nondeterminism"
        )
        knobs = QWidget()
        knob_layout = QGridLayout(knobs)
        knob_layout.setContentsMargins(0, 0, 0, 0)
        self.knobs: dict[str, QCheckBox] = {}
        for index, (name, tip, _) in enumerate(KNOBS):
            box = QCheckBox(name)
            box.setToolTip(tip + " Adds a batch-1 run on every chosen device.")
            box.toggled.connect(self.changed)
            knob_layout.addWidget(box, index // 2, index % 2)
            self.knobs[name] = box
        form = QFormLayout(self)
        form.addRow("devices", self.device_box)
        form.addRow("batch sizes", self.batches)
        form.addRow("batch context", self.context)
        form.addRow("repeats", self.repeats)
        form.addRow("one knob at a time", knobs)
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
        plain = [c for c in configs if c.label() == f"{c.device} b{c.batch}"]
        self.batches.setText(", ".join(str(b) for b in sorted({c.batch for c in plain})))
        self.repeats.setValue(repeats)
        for name, _, variant in KNOBS:
            self.knobs[name].setChecked(
                any(all(getattr(c, k) == v for k, v in variant.items()) for c in configs)
            )
        devices = sorted({c.device for c in configs}, key=lambda d: (d != "cpu", d))
        self.set_devices(sorted(set(self.devices) | set(devices)), devices)
        for widget in (*self.knobs.values(), *self.devices.values(), self.repeats):
            widget.blockSignals(False)

    def batch_sizes(self) -> list[int]:
        sizes = []
        for part in self.batches.text().replace(";", ",").split(","):
            part = part.strip()
            if part.isdigit() and int(part) > 0:
                sizes.append(int(part))
        return sorted(set(sizes)) or [1]

    def configs(self) -> list[RunConfig]:
        devices = [name for name, box in self.devices.items() if box.isChecked()] or ["cpu"]
        context = self.context.currentText()
        configs = [
            RunConfig(device=d, batch=b, context=context)  # type: ignore[arg-type]
            for d in devices
            for b in self.batch_sizes()
        ]
        for name, _, variant in KNOBS:
            if self.knobs[name].isChecked():
                for device in devices:
                    if variant.get("tf32") is False and device == "cpu":
                        continue  # TF32 is a GPU mode: the run would equal the plain one
                    configs.append(RunConfig(device=device, **variant))  # type: ignore[arg-type]
        return configs
