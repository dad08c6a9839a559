"""The Layers tab: a layer probe between the reference and the run last clicked, as the table
of ``segdiff layers`` and a chart of the relative error per layer in execution order (log
scale, the first differing layer marked). Choosing a layer (in the table or the chart) shows
where in the image it differs, in the grid beside the runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from segdiff_gui.core.analysis import is_multiclass
from segdiff_gui.core.config import is_reduced_precision
from segdiff_gui.core.defaults import DEFAULT_LAYER_DISK_BUDGET, DEFAULT_LAYER_MEMORY_BUDGET
from segdiff_gui.core.layer_stats import LAYER_COLUMNS, LayerStats, layer_cells, layer_columns
from segdiff_gui.core.text import printable
from segdiff_gui.runner.layers import LayerProbe
from segdiff_gui.ui.plain_text import as_html, plain_label, rich_label
from segdiff_gui.ui.widgets import fill_row, read_only_table

if TYPE_CHECKING:
    from pyqtgraph import SpotItem  # pyqtgraph ships no types: Any to mypy

__all__ = ["LayersPanel"]

_FLOOR = 1e-12  # a layer that agrees exactly is drawn here on the log scale


def _plotted(layer: LayerStats) -> float:
    return _FLOOR if layer.relative_error <= 0 else min(layer.relative_error, 1e6)


class LayersPanel(QWidget):
    """Shows one :class:`LayerProbe`; ``probe_requested`` asks for a probe of the reference
    against the run last clicked; ``layer_chosen`` names a layer's index."""

    probe_requested = Signal()
    repair_requested = Signal()
    cancel_requested = Signal()
    layer_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.probe: LayerProbe | None = None
        self.title = rich_label(QLabel())  # the runs' labels in it are escaped
        self.title.setText(
            "Probe the reference against the run last clicked, layer by layer: where in the "
            "network the difference is born and where it grows."
        )
        self.title.setWordWrap(True)
        self.probe_button = QPushButton("Probe layers (reference vs run)")
        self.probe_button.clicked.connect(self.probe_requested)
        self.repair_button = QPushButton("Repair precision…")
        self.repair_button.setToolTip(
            "Find the layers to keep in float32 so that this reduced precision's flips at the "
            "cutoff disappear: the probe blames the layers, trials (each a cached run) decide"
        )
        self.repair_button.clicked.connect(self.repair_requested)
        self.repair_button.setEnabled(False)
        self.bound = QSpinBox()
        self.bound.setRange(0, 10_000_000)
        self.bound.setPrefix("flips allowed: ")
        self.bound.setToolTip(
            "How many flips at the cutoff the repair may leave: a few flips may keep far "
            "fewer layers in float32"
        )
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.cancel_button.setVisible(False)
        # What a probe may hold at once and what the cache keeps of probes' tensors (the
        # command line's --memory and --keep).
        self.memory = QSpinBox()
        self.memory.setRange(1, 1 << 20)
        self.memory.setSuffix(" MiB")
        self.memory.setPrefix("memory: ")
        self.memory.setValue(DEFAULT_LAYER_MEMORY_BUDGET >> 20)
        self.memory.setToolTip(
            "Layer tensors a comparison holds at once: each layer is stored and compared in "
            "pieces of rows that fit"
        )
        self.keep = QDoubleSpinBox()
        self.keep.setRange(0.0, 1024.0)
        self.keep.setDecimals(1)
        self.keep.setSuffix(" GiB")
        self.keep.setPrefix("keep tensors: ")
        self.keep.setValue(DEFAULT_LAYER_DISK_BUDGET / 2**30)
        self.keep.setToolTip(
            "Probes' layer tensors the cache keeps, least recently used removed first; the "
            "figures and difference maps are always kept (0 keeps none)"
        )
        self.status = plain_label(QLabel())  # runs' labels, errors that quote paths
        self.status.setWordWrap(True)
        self.table = read_only_table(LAYER_COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.itemSelectionChanged.connect(self._row_chosen)
        self.chart = pg.PlotWidget(background="w")
        self.chart.setMinimumHeight(180)
        self.chart.setLogMode(y=True)
        self.chart.setLabel("left", "relative error ‖Δ‖/‖ref‖")
        self.chart.setLabel("bottom", "layer # in execution order (names in the table)")
        self.chart.getAxis("left").enableAutoSIPrefix(False)
        self.chart.showGrid(y=True, alpha=0.3)
        self.summary = rich_label(QLabel())  # sentences, escaped
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QHBoxLayout()
        buttons.addWidget(self.probe_button)
        buttons.addWidget(self.repair_button)
        buttons.addWidget(self.bound)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        budgets = QHBoxLayout()
        budgets.addWidget(self.memory)
        budgets.addWidget(self.keep)
        budgets.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addLayout(buttons)
        layout.addLayout(budgets)
        layout.addWidget(self.status)
        layout.addWidget(self.chart, 2)
        layout.addWidget(self.table, 3)
        layout.addWidget(self.summary)

    def budgets(self) -> tuple[int, int]:
        """The memory and disk budgets in bytes, as chosen."""
        return self.memory.value() << 20, int(self.keep.value() * 2**30)

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.probe_button.setEnabled(not busy)
        self.repair_button.setEnabled(not busy and self._repairable())
        self.cancel_button.setVisible(busy)
        self.status.setText(text)

    def _repairable(self) -> bool:
        """A probe whose other side computes in a reduced precision can be repaired."""
        if self.probe is None:
            return False
        config = self.probe.stored.other.get("config", {})
        return is_reduced_precision(str(config.get("precision", "float32")))

    def show_probe(self, probe: LayerProbe, sentences: list[str]) -> None:
        self.probe = probe
        self.repair_button.setEnabled(self._repairable())
        stored = probe.stored
        where = "class flips at argmax" if is_multiclass(stored.final_maps[0]) else "flips"
        self.title.setText(
            f"<b>{as_html(printable(probe.reference_label))} → "
            f"{as_html(printable(probe.other_label))}</b>: "
            f"{len(probe.comparison.layers)} layers; the last row's {where} are the output's. "
            "Choose a layer to see where in the image it differs."
        )
        layers = probe.comparison.layers
        first = probe.comparison.first_differing
        self.table.blockSignals(True)
        columns = layer_columns(probe.comparison)  # a quantized side's scale and steps too
        self.table.setColumnCount(len(columns))
        self.table.setHorizontalHeaderLabels(list(columns))
        self.table.setRowCount(len(layers))
        quantized = probe.comparison.quantized
        for index, layer in enumerate(layers):
            cells = layer_cells(index, layer, layer is first, quantized)
            fill_row(self.table, index, [printable(cell) for cell in cells])  # one line each
        self.table.blockSignals(False)
        self.summary.setText("<br>".join(as_html(printable(line)) for line in sentences))
        self._draw()
        chosen = layers.index(first) if first is not None else len(layers) - 1
        if layers:
            self.table.selectRow(chosen)

    def _draw(self) -> None:
        self.chart.clear()
        if self.probe is None:
            return
        layers = self.probe.comparison.layers
        errors = np.array([_plotted(layer) for layer in layers])
        x = np.arange(len(layers))
        curve = self.chart.plot(
            x, errors, pen=pg.mkPen("#1f77b4", width=2), symbol="o", symbolSize=7,
            symbolBrush="#1f77b4",
        )  # fmt: skip
        curve.sigPointsClicked.connect(self._point_clicked)
        first = self.probe.comparison.first_differing
        if first is not None:
            index = layers.index(first)
            dashed = pg.mkPen("#d62728", width=1, style=Qt.PenStyle.DashLine)
            # The label is a format string to pyqtgraph (its {value}): a name's braces are text.
            name = printable(first.name).replace("{", "{{").replace("}", "}}")
            line = pg.InfiniteLine(
                pos=index, angle=90, pen=dashed, label=f"first differs: {name}",
                labelOpts={"position": 0.9, "color": "#d62728"},
            )  # fmt: skip
            self.chart.addItem(line)
        step = max(1, len(layers) // 20)
        ticks = [(i, str(i)) for i in range(0, len(layers), step)]
        self.chart.getAxis("bottom").setTicks([ticks])
        # The chosen layer, ringed (a data item, so that the log scale applies to it too).
        self._marker = self.chart.plot(
            [], [], pen=None, symbol="o", symbolSize=15, symbolBrush=None,
            symbolPen=pg.mkPen("#d62728", width=2),
        )  # fmt: skip

    def _point_clicked(self, _item: object, points: Sequence[SpotItem]) -> None:
        if points:
            self.table.selectRow(int(points[0].pos().x()))

    def _row_chosen(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or self.probe is None:
            return
        index = rows[0].row()
        self._marker.setData([index], [_plotted(self.probe.comparison.layers[index])])
        self.layer_chosen.emit(index)
