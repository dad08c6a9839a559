"""The clicked pixel in every run: exact value (shortest round-trip float32), its bits,
difference and ULPs to the reference, and class at the cutoff. Copy as TSV."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractScrollArea, QLabel, QPushButton, QVBoxLayout, QWidget

from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.widgets import fill_row, read_only_table

__all__ = ["PixelInspector"]

HEADERS = ("run", "value", "bits", "Δ to reference", "ULPs", "class")


class PixelInspector(QWidget):
    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.title = QLabel("Click a pixel to read every run's exact value.")
        self.table = read_only_table(HEADERS)
        # Its size hint is the width of its columns: the window gives the dock that much room.
        self.table.setSizeAdjustPolicy(QAbstractScrollArea.SizeAdjustPolicy.AdjustToContents)
        self.copy_button = QPushButton("Copy as TSV")
        self.copy_button.setToolTip("Copy the table (tab-separated) for a spreadsheet or an issue")
        self.copy_button.clicked.connect(self.copy_tsv)
        QShortcut(QKeySequence.StandardKey.Copy, self.table, activated=self.copy_tsv)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.copy_button)
        for signal in (
            model.pixel_selected,
            model.cutoff_changed,
            model.reference_changed,
            model.class_changed,
            model.runs_changed,
        ):
            signal.connect(self.refresh)

    def refresh(self, *_: object) -> None:
        pixel = self.model.selected_pixel
        if pixel is None:
            return
        row, column = pixel
        values = self.model.pixel_values(row, column)
        plane = f", class {self.model.class_index}" if self.model.multiclass else ""
        self.title.setText(f"Pixel row {row}, column {column}{plane}")
        self.table.setRowCount(len(values))
        for index, value in enumerate(values):
            cells = (
                value.label + (" (reference)" if value.is_reference else ""),
                value.text,
                value.bits,
                f"{value.difference:+.9g}",
                f"{value.ulps:,}",
                str(value.class_index),
            )
            fill_row(self.table, index, cells)

    def as_tsv(self) -> str:
        lines = ["\t".join(HEADERS)]
        for row in range(self.table.rowCount()):
            cells = [self.table.item(row, c).text() for c in range(self.table.columnCount())]
            lines.append("\t".join(cells))
        return "\n".join(lines) + "\n"

    def copy_tsv(self) -> None:
        QGuiApplication.clipboard().setText(self.as_tsv())
