"""Attribution of a pair of runs: the table of ``segdiff explain`` and a bar chart of one
figure per knob, alone and along the cumulative path, with the repeat spread beside them."""

from __future__ import annotations

from html import escape

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.attribution import Attribution
from segdiff_gui.ui.plain_text import rich_label
from segdiff_gui.ui.widgets import fill_row, read_only_table

__all__ = ["AttributionDialog"]

COLUMNS = (
    "step",
    "knob",
    "change",
    "compared",
    "max ULP",
    "max |Δ|",
    "differing",
    "flips",
    "at risk",
)
FIGURES = {
    "differing pixels": "differing_pixels",
    "max ULP": "max_ulp",
    "flips at the cutoff": "flips",
    "at-risk pixels": "at_risk",
}


class AttributionDialog(QDialog):
    """Shows one :class:`Attribution`; ``run_missing`` asks the window to compute the
    configurations that have no run yet."""

    run_missing = Signal()

    def __init__(self, attribution: Attribution, can_run: bool, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Explain the difference")
        self.resize(980, 640)
        self.title = rich_label(QLabel())  # the runs' labels in it are escaped
        self.title.setWordWrap(True)  # a sentence: whole on a laptop's screen, not cut at its edge
        self.table = read_only_table(COLUMNS)
        self.figure = QComboBox()
        self.figure.addItems(list(FIGURES))
        self.figure.currentIndexChanged.connect(self._draw)
        self.chart = pg.PlotWidget(background="w")
        self.chart.setMinimumHeight(220)
        self.chart.addLegend(offset=(-10, 10))
        self.missing = rich_label(QLabel())  # sentences, escaped
        self.missing.setWordWrap(True)
        self.run_button = QPushButton("Run the missing configurations")
        self.run_button.clicked.connect(self.run_missing)
        self.run_button.setVisible(False)
        self.can_run = can_run
        chooser = QHBoxLayout()
        chooser.addWidget(QLabel("Bar chart of"))
        chooser.addWidget(self.figure)
        chooser.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 3)
        layout.addLayout(chooser)
        layout.addWidget(self.chart, 2)
        layout.addWidget(self.missing)
        layout.addWidget(self.run_button)
        self.set_attribution(attribution)

    def set_attribution(self, attribution: Attribution) -> None:
        self.attribution = attribution
        plan = attribution.plan
        where = at_cutoff(attribution.cutoff, attribution.multiclass)
        self.title.setText(
            f"<b>What moves {escape(plan.base.label())} to {escape(plan.target.label())}</b> "
            f"{where}: each knob alone from the base, then knob after knob towards the target; "
            "repeats show the spread of one configuration's own reruns."
        )
        rows = attribution.rows
        self.table.setRowCount(len(rows))
        for index, row in enumerate(rows):
            figures = row.effect.cells() if row.effect else ["not measured", "", "", "", ""]
            compared = f"{row.compared[0]} → {row.compared[1]}"
            fill_row(self.table, index, [row.kind, row.knob, row.change, compared, *figures])
        missing = any(row.missing for row in rows)
        self.missing.setText("<br>".join(escape(line) for line in attribution.sentences()))
        self.run_button.setVisible(missing and self.can_run)
        self._draw()

    def _draw(self, *_: object) -> None:
        name = FIGURES[self.figure.currentText()]
        self.chart.clear()
        steps = self.attribution.plan.steps
        ticks = [(i, step.knob) for i, step in enumerate(steps)]
        series = [("alone", "#1f77b4", -0.2), ("cumulative", "#ff7f0e", 0.2)]
        for kind, colour, shift in series:
            heights = [
                float(getattr(row.effect, name)) if row.effect else 0.0
                for row in self.attribution.of(kind)
            ]
            if heights:
                bars = pg.BarGraphItem(
                    x=np.arange(len(heights)) + shift, height=heights, width=0.38, brush=colour,
                    name=kind,
                )  # fmt: skip
                self.chart.addItem(bars)
        repeats = [row.effect for row in self.attribution.of("repeats") if row.effect]
        if repeats:
            spread = max(float(getattr(effect, name)) for effect in repeats)
            x = len(steps)
            self.chart.addItem(
                pg.BarGraphItem(x=[x], height=[spread], width=0.5, brush="#7f7f7f", name="repeats")
            )
            ticks.append((x, "repeats"))
        self.chart.getAxis("bottom").setTicks([ticks])
        self.chart.setLabel("left", self.figure.currentText())
