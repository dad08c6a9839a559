"""The test set in the window: while a sweep runs, how far it is (batches and runs, with the
time left), then every image's figures per configuration in a sortable table (double-click
a row to show that image in the views), and the test-set means."""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.sweep import SweepSummary
from segdiff_gui.core.text import printable
from segdiff_gui.ui.plain_text import plain_label, rich_label, tooltip_text

__all__ = ["SweepPanel"]


def _number(value: float | int, text: str) -> QStandardItem:
    """A cell that shows ``text`` but sorts by ``value``."""
    item = QStandardItem(text)
    item.setData(value, Qt.ItemDataRole.UserRole)
    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


class SweepPanel(QWidget):
    sweep_requested = Signal()
    cancel_requested = Signal()
    truth_chosen = Signal(object)  # a Path, or None to use no ground truth
    image_opened = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary: SweepSummary | None = None
        self.sweep_button = QPushButton("Sweep every image")
        self.sweep_button.setToolTip(
            "Run the matrix on every image of the set (cached runs are not recomputed) and "
            "summarise each image against the reference configuration"
        )
        self.sweep_button.clicked.connect(self.sweep_requested)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip(
            "Stop the sweep now: the runs that finished stay cached and are summarised"
        )
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel_requested)
        # How far a sweep is, in batches (the words under it say the runs and the time left).
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.truth_button = QPushButton("Ground truth…")
        self.truth_button.setToolTip(
            "A folder of masks named like the images (cell_07.png ↔ cell_07.png or "
            "cell_07_mask.png): Dice and IoU per configuration"
        )
        self.truth_button.clicked.connect(self._choose_truth)
        self.truth_label = plain_label(QLabel("no ground truth"))  # a folder's name
        # A long folder name must not widen the dock (and narrow the maps): it may be cut off;
        # the whole path is the tooltip.
        self.truth_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        # HTML: what is said of the sweep (as_html) or its summary, names escaped.
        self.status = rich_label(QLabel("Sweep the set to see every image's figures."))
        self.status.setWordWrap(True)
        self.items = QStandardItemModel(0, 0, self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.items)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.doubleClicked.connect(self._open_row)
        buttons = QHBoxLayout()
        buttons.addWidget(self.sweep_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.truth_button)
        buttons.addWidget(self.truth_label, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)

    def set_truth(self, folder: Path | None) -> None:
        if folder is None:
            self.truth_label.setText("no ground truth")
            self.truth_label.setToolTip("")
            return
        whole = folder.resolve()
        self.truth_label.setText(printable(f"truth: {whole.name or whole}"))  # the name first
        self.truth_label.setToolTip(tooltip_text(str(whole)))

    def _choose_truth(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder of ground-truth masks")
        if folder:
            self.set_truth(Path(folder))
            self.truth_chosen.emit(Path(folder))

    def set_sweeping(self, sweeping: bool) -> None:
        """A sweep in flight: its bar shown (busy until its batches are known) and Cancel
        offered in place of another sweep; at its end both go."""
        self.sweep_button.setEnabled(not sweeping)
        self.cancel_button.setVisible(sweeping)
        self.cancel_button.setEnabled(sweeping)
        self.progress.setVisible(sweeping)
        self.progress.setRange(0, 0)  # busy: planning, or summarising at the end

    def show_progress(self, text: str, done: int, total: int) -> None:
        """How far the sweep is: ``done`` of ``total`` batches, and ``text`` (numbers only)."""
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done if total else 1)
        self.status.setText(escape(text))

    def show_summary(self, summary: SweepSummary) -> None:
        self.summary = summary
        names = summary.configurations
        truth = summary.has_truth
        # The reference against itself is all zeros unless its repeats differ: no columns then.
        quiet = {
            name
            for name in names
            if name == summary.reference
            and not any(
                image.configurations[name].effect.differing_pixels
                for image in summary.images
                if name in image.configurations
            )
        }
        headers = ["image", "flips (all)"]
        for name in names:
            if name not in quiet:
                headers += [f"flips · {name}", f"at risk · {name}", f"max ULP · {name}"]
            if truth:
                headers.append(f"Dice · {name}")
        self.items.clear()
        self.items.setHorizontalHeaderLabels(headers)
        for image in summary.images:
            entries = image.configurations
            total = sum(entry.effect.flips for entry in entries.values())
            name_item = QStandardItem(image.image)
            name_item.setData(image.image, Qt.ItemDataRole.UserRole)
            row = [name_item, _number(total, f"{total:,}")]
            for name in names:
                entry = entries.get(name)
                width = (0 if name in quiet else 3) + (1 if truth else 0)
                if entry is None:
                    row += [_number(-1, "") for _ in range(width)]
                    continue
                effect = entry.effect
                if name not in quiet:
                    row += [
                        _number(effect.flips, f"{effect.flips:,}"),
                        _number(effect.at_risk, f"{effect.at_risk:,}"),
                        _number(effect.max_ulp, f"{effect.max_ulp:,}"),
                    ]
                if truth:
                    dice = entry.overlaps[0].dice if entry.overlaps else -1.0
                    row.append(_number(dice, f"{dice:.6f}" if dice >= 0 else ""))
            self.items.appendRow(row)
        self.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.status.setText(self._status_html(summary))

    def _status_html(self, summary: SweepSummary) -> str:
        lines = [
            f"<b>{summary.images_text()}</b> against <b>{escape(summary.reference)}</b> "
            f"{at_cutoff(summary.cutoff, summary.multiclass)}; double-click a row to show that "
            "image.",
            # What of a merged test set is missing, named (image names escaped).
            *(f"<b>{escape(coverage.sentence())}</b>" for coverage in summary.incomplete),
        ]
        for row in summary.rows():
            text = (
                f"{escape(row['configuration'])}: {row['flips']:,} flips in "
                f"{row['images_with_flips']:,} images, max {row['max_ulp']:,} ULP"
            )
            if row["partial"]:
                text += f" (partial: {row['images']} of {len(summary.images)} images)"
            if row["mean_dice"] is not None:
                text += f", mean Dice {row['mean_dice']:.6f}"
                if delta := summary.delta_text(row):
                    text += f" ({escape(delta)})"
                if row["dice_repeat_range"]:
                    text += f", range over repeats {row['dice_repeat_range']:.2e}"
            lines.append(text)
        return "<br>".join(lines)

    def _open_row(self, index: QModelIndex) -> None:
        source = self.proxy.mapToSource(index)
        self.image_opened.emit(self.items.item(source.row(), 0).text())
