"""The precision repair's answer: which layers to keep in float32, the flips and ULPs before
and after, the trials, and the Keras code to apply it; the repaired run can join the views."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from segdiff_gui.core.repair import RepairResult
from segdiff_gui.core.text import printable
from segdiff_gui.ui.plain_text import as_html, rich_label
from segdiff_gui.ui.widgets import fill_row, read_only_table

__all__ = ["RepairDialog"]

COLUMNS = ("kept", "flips", "max ULP", "differing px", "layers kept in float32")


class RepairDialog(QDialog):
    """Shows one :class:`RepairResult`; ``show_run`` asks to add the repaired run to the
    views."""

    show_run = Signal()

    def __init__(self, result: RepairResult, code: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Precision repair")
        self.resize(900, 640)
        self.repair, self.code = result, code
        self.summary = rich_label(QLabel())  # sentences, escaped
        lines = result.sentences()  # one line each, naming layers
        self.summary.setText("<br>".join(as_html(printable(line)) for line in lines))
        self.summary.setWordWrap(True)
        self.table = read_only_table(COLUMNS)
        trials = sorted(result.trials, key=lambda t: (len(t.kept), t.flips or 0))
        self.table.setRowCount(len(trials))
        for row, trial in enumerate(trials):
            flips = "failed" if trial.flips is None else f"{trial.flips:,}"
            cells = [str(len(trial.kept)), flips, f"{trial.max_ulp:,}",
                     f"{trial.differing_pixels:,}", ", ".join(trial.kept)]  # fmt: skip
            fill_row(self.table, row, cells)
        self.code_view = QPlainTextEdit(code or "# nothing to apply: no layer needs float32")
        self.code_view.setReadOnly(True)
        self.code_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.copy_button = QPushButton("Copy the code")
        self.copy_button.clicked.connect(self._copy)
        self.copy_button.setEnabled(bool(code))
        self.run_button = QPushButton("Show the repaired run beside the others")
        self.run_button.clicked.connect(self.show_run)
        self.run_button.setEnabled(bool(result.kept))
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.run_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(QLabel("Trials, each a cached run (fewest layers kept first):"))
        layout.addWidget(self.table, 2)
        layout.addWidget(QLabel("Apply it to your model (Keras):"))
        layout.addWidget(self.code_view, 3)
        layout.addLayout(buttons)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
