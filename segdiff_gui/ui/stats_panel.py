"""Every run against the reference, determinism verdicts, and the flips-vs-cutoff curve with
a marker at the current cutoff.

The table shows every run it can (as tall as its rows, where the tab has the room); under it
the sentences, the curve and the histogram share the rest as tabs of their own, so that none is
squeezed to a few pixels on a laptop's screen."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHeaderView,
    QLabel,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from segdiff_gui.core.analysis import difference_map
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.plain_text import plain_label
from segdiff_gui.ui.widgets import fill_row, read_only_table

__all__ = ["StatsPanel"]

COLUMNS = ("run", "max |Δ|", "mean |Δ|", "max ULP", "differing", "flips")
EXACT_COLUMN = "vs exact"  # beside an exact (float64) run: each run's error against it
_PENS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
_BELOW_LEAST = 150  # pixels: the sentences' and plots' tabs under the table, at least
_RUN_SHARE = 0.4  # of the width the figures leave: the run column's most, beside "vs exact"
_RUN_LEAST = 90  # pixels: the run column's least, its label wrapped at its spaces


class StatsPanel(QWidget):
    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.table = read_only_table(COLUMNS)
        self.table.setWordWrap(True)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The labels wrap at their spaces, beside figures that are never cut.
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().sectionResized.connect(self._fit_height)  # wraps anew
        self.verdicts = plain_label(QLabel())  # runs' labels (a host's name, an import's)
        self.verdicts.setWordWrap(True)
        self.verdicts.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.verdicts.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        sentences = QScrollArea()
        sentences.setWidget(self.verdicts)
        sentences.setWidgetResizable(True)
        sentences.setFrameShape(QFrame.Shape.NoFrame)
        sentences.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.below = QTabWidget()
        self.below.setDocumentMode(True)
        self.below.addTab(sentences, "Summary")
        self.below.setMinimumHeight(_BELOW_LEAST)
        self._layout = QVBoxLayout(self)
        # The table grows to its rows first (its most height is their height: see
        # _fit_height); the tabs under it take what is left.
        self._layout.addWidget(self.table, 20)
        self._layout.addWidget(self.below, 1)
        # The plots are made when the tab is first shown: two pyqtgraph plots cost about
        # 20 ms of every launch, and the Inspector is the tab on show.
        self.curve_plot: pg.PlotWidget | None = None
        self.histogram: pg.PlotWidget | None = None
        self.marker: pg.InfiniteLine | None = None
        self._stale: set[str] = set()
        model.events.loaded.connect(self.refresh)
        model.events.reference_key.connect(self.refresh)
        model.events.cutoff.connect(self.refresh_table)

    def _hidden(self, part: str) -> bool:
        """While the tab is hidden nothing is computed (dragging the cutoff stays fast); what
        went stale is redone when it is shown."""
        if self.isVisible():
            self._make_plots()
            return False
        self._stale.add(part)
        return True

    def _make_plots(self) -> None:
        if self.curve_plot is not None:
            return
        self.curve_plot = pg.PlotWidget(background="w")
        self.curve_plot.setLabel("bottom", "cutoff")
        self.curve_plot.setLabel("left", "flipped pixels")
        self.curve_plot.setLogMode(y=False)
        self.curve_plot.setMinimumHeight(100)
        self.marker = pg.InfiniteLine(
            angle=90, movable=False, pen=pg.mkPen("k", style=Qt.PenStyle.DashLine)
        )
        self.histogram = pg.PlotWidget(background="w")
        self.histogram.setLabel("bottom", "difference to the reference")
        self.histogram.setLabel("left", "log10(1 + pixels)")  # short: the plot is low
        self.histogram.setMinimumHeight(100)
        self.below.addTab(self.curve_plot, "Flips vs cutoff")
        self.below.addTab(self.histogram, "Differences")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._make_plots()
        stale, self._stale = self._stale, set()
        for part in ("table", "curves", "histogram"):
            if part in stale:
                getattr(self, f"refresh_{part}")()

    def refresh(self) -> None:
        self.refresh_table()
        self.refresh_curves()
        self.refresh_histogram()

    def refresh_table(self, *_: object) -> None:
        study = self.model.study
        if self._hidden("table") or study is None:
            return
        rows = study.rows()
        errors = study.exact_errors  # each run against the exact run, where there is one
        columns = (*COLUMNS, EXACT_COLUMN) if errors else COLUMNS
        if self.table.columnCount() != len(columns):
            self.table.setColumnCount(len(columns))
            self.table.setHorizontalHeaderLabels(list(columns))
            if errors:  # its sentence wraps in the width left: never cut at the dock's edge
                self.table.horizontalHeader().setSectionResizeMode(
                    len(COLUMNS), QHeaderView.ResizeMode.Stretch
                )
        self.table.setRowCount(len(rows))
        for index, row in enumerate(rows):
            cells: tuple[str, ...] = (
                row["label"],
                f"{row['max_abs']:.3g}",
                f"{row['mean_abs']:.3g}",
                f"{row['max_ulp']:,}",
                f"{row['differing_pixels']:,}",
                f"{row['flips']:,}" + (f" (+{row['ties']:,} tied)" if row["ties"] else ""),
            )
            cells += (errors[row["key"]].summary(),) if errors else ()
            fill_row(self.table, index, cells)
        lines = [f"{name}: {verdict.sentence()}" for name, verdict in study.verdicts.items()]
        lines.append(study.at_risk_sentence())
        if errors:  # the reference against the exact run, and which side of each flip is right
            lines.append(errors[study.reference.key].sentence(study.multiclass))
            lines += [sides.sentence() for sides in study.flip_sides.values() if sides.flips]
        tied = max(rows, key=lambda row: row["ties"], default=None)
        if tied is not None and tied["ties"]:
            lines.append(
                f"Ties: {tied['ties']:,} pixels of {tied['label']} have their most likely "
                "classes exactly equal in one map; argmax's lowest class is no class decision, "
                "so they are not counted as flips."
            )
        self.verdicts.setText("\n".join(lines))
        assert self.marker is not None  # made when shown
        self.marker.setPos(self.model.cutoff)
        self._fit_columns()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_columns()

    def _fit_columns(self) -> None:
        """The figures at their contents' width; the run's label at its own, where that
        leaves "vs exact" (which wraps in what is left) room, else wrapped at its spaces."""
        table = self.table
        if table.columnCount() == 0:
            return
        header = table.horizontalHeader()
        figures = sum(header.sectionSize(c) for c in range(1, len(COLUMNS)))
        room = table.viewport().width() - figures
        if table.columnCount() > len(COLUMNS):  # "vs exact" shares the room
            room = int(room * _RUN_SHARE)
        wanted = max(table.sizeHintForColumn(0), header.sectionSizeHint(0))
        table.setColumnWidth(0, max(min(wanted, room), _RUN_LEAST))
        self._fit_height()

    def _fit_height(self, *_: object) -> None:
        """The table at most as tall as its rows: the tabs under it take the rest."""
        table = self.table
        # Asked of the rows' contents at the columns' widths now (the rows' own heights
        # follow them at the next layout).
        least = table.verticalHeader().minimumSectionSize()
        rows = sum(max(table.sizeHintForRow(row), least) for row in range(table.rowCount()))
        frame = 2 * table.frameWidth() + table.horizontalHeader().height()
        scroll = table.horizontalScrollBar()
        sideways = scroll.sizeHint().height() if scroll.maximum() > 0 else 0
        table.setMaximumHeight(rows + frame + sideways)

    def refresh_curves(self) -> None:
        if self._hidden("curves"):
            return
        study = self.model.study
        assert self.curve_plot is not None and self.marker is not None  # made when shown
        self.curve_plot.clear()
        if study is None or study.multiclass:
            self.curve_plot.setTitle("argmax: no cutoff curve" if study else "")
            return
        self.curve_plot.setTitle("flips vs cutoff")
        grid = np.linspace(0.0, 1.0, 501)
        highest = 0
        for index, run in enumerate(study.others):
            counts = study.curve(run).at(grid)
            highest = max(highest, int(counts.max(initial=0)))
            self.curve_plot.plot(
                grid, counts, pen=pg.mkPen(_PENS[index % len(_PENS)]), name=run.label
            )
        # Counts are never negative: no flip at any cutoff is an axis from 0, not ±something.
        self.curve_plot.setYRange(0, max(highest, 1), padding=0.05)
        self.curve_plot.addItem(self.marker)
        self.marker.setPos(self.model.cutoff)

    def refresh_histogram(self) -> None:
        """Signed differences of every run to the reference, one outline per run."""
        if self._hidden("histogram"):
            return
        study = self.model.study
        assert self.histogram is not None  # made when shown
        self.histogram.clear()
        if study is None or not study.others:
            return
        differences = {
            run.label: difference_map(study.reference.probabilities, run.probabilities).ravel()
            for run in study.others
        }
        finite = np.concatenate([d[np.isfinite(d)] for d in differences.values()])
        limit = float(np.abs(finite).max(initial=0.0)) or 1e-9
        edges = np.linspace(-limit, limit, 81)
        for index, (label, values) in enumerate(differences.items()):
            counts, _ = np.histogram(values[np.isfinite(values)], bins=edges)
            self.histogram.plot(
                edges,
                np.log10(1 + counts),
                stepMode="center",
                pen=pg.mkPen(_PENS[index % len(_PENS)]),
                name=label,
            )
