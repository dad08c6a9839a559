"""The clicked pixel in every run: exact value (shortest round-trip float32), its bits,
difference and ULPs to the reference, and class at the cutoff. Copy as TSV."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QResizeEvent, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from segdiff_gui.ui.inspection import InspectionModel, PixelValue
from segdiff_gui.ui.plain_text import tooltip_text
from segdiff_gui.ui.widgets import cell_text, fill_row, read_only_table

__all__ = ["PixelInspector"]

# Each column's name in a copy (TSV), its header (short: the numbers need the width) and the
# header's tooltip.
_COLUMNS = (
    ("run", "run", "The run; hover a run for what it computed with"),
    ("value", "value", "The pixel's value, shortest round-trip float32 (float64 for exact)"),
    ("bits", "bits", "The value's bits in hexadecimal"),
    ("Δ to reference", "Δ ref", "Difference to the reference run"),
    ("ULPs", "ULPs", "float32 steps from the reference run's value"),
    (
        "class",
        "class",
        "Class at the cutoff ('tie': the top classes exactly equal, no class decided); "
        "beside an exact run, ✓ right or ✗ wrong (a tie is wrong where the exact map decides)",
    ),
)
# Beside an exact (float64) run: each run's float32 steps from the exact value.
_EXACT_COLUMN = ("ULPs from exact", "vs exact", "float32 steps from the exact (float64) value")
HEADERS = tuple(name for name, _, _ in _COLUMNS)
EXACT_HEADER = _EXACT_COLUMN[0]
_BITS = HEADERS.index("bits")  # shown last: what is needed most stays in view on a narrow dock
_CLASS = HEADERS.index("class")
_FULL_TEXT = Qt.ItemDataRole.UserRole  # a cell's text in a copy, where the cell shows less
_RUN_COLUMN_LEAST = 110  # pixels: "cpu b64 xl…r0" still says which run
# A wide row as the table shows it: its width is what the inspector asks of the window, before
# any pixel is chosen (a first launch sizes its docks while the demo still computes).
_TYPICAL_ROW = (
    "cpu b1 r0 (reference)",
    "0.49860257",
    "0x3eff48d6",
    "+2.98023224e-08",
    "46,890",
    "0",
)
# Beside an exact run: the typical row with its ULPs from exact, and the exact run's own row
# (its float64 value and bits are the widest of the table).
_TYPICAL_ROWS_BESIDE_EXACT = (
    (*_TYPICAL_ROW[:5], "0 ✓", "46,887"),
    (
        "cpu b1 fp64 r0 (exact)",
        "0.49860265540317467",
        "0x3fdfe91b1ca9f1f5",
        "+1.45904578e-07",
        "5",
        "0",
        "—",
    ),
)


class PixelInspector(QWidget):
    # The rows need this many pixels more than the table has: its columns would hide.
    widened = Signal(int)

    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.title = QLabel("Click a pixel to read every run's exact value.")
        self.table = read_only_table(HEADERS)
        self._columns: tuple[tuple[str, str, str], ...] = ()  # see _set_headers
        self._set_headers(_COLUMNS)
        # The numbers must stay in view: the run's name takes what is left (elided, with the
        # whole name as its tooltip), never pushes Δ, ULPs and class off the edge.
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self._typical_widths: dict[bool, int] = {}  # see wanted_width
        self._fitted_for: tuple[str, ...] = ()  # the runs the run column was last fitted to
        self.copy_button = QPushButton("Copy as TSV")
        self.copy_button.setToolTip("Copy the table (tab-separated) for a spreadsheet or an issue")
        self.copy_button.clicked.connect(self.copy_tsv)
        copy = QShortcut(QKeySequence(QKeySequence.StandardKey.Copy), self.table)
        copy.activated.connect(self.copy_tsv)
        self._layout = layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.copy_button)
        events = model.events
        for event in (
            events.selected_pixel,
            events.cutoff,
            events.reference_key,
            events.class_index,
            events.loaded,
        ):
            event.connect(self.refresh)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self.wanted_width(), super().sizeHint().height())

    def wanted_width(self, beside_exact: bool = False) -> int:
        """As wide as the table's columns for a typical row (and, ``beside_exact``, an exact
        run's row and column), or for the rows it holds if they are wider."""
        typical = self._typical_widths.get(beside_exact)
        if typical is None:
            # The same fonts, style and headers as the table.
            columns = (*_COLUMNS, _EXACT_COLUMN) if beside_exact else _COLUMNS
            rows = _TYPICAL_ROWS_BESIDE_EXACT if beside_exact else (_TYPICAL_ROW,)
            sample = read_only_table([header for _, header, _ in columns])
            sample.setFont(self.table.font())
            sample.setRowCount(len(rows))
            for index, row in enumerate(rows):
                fill_row(sample, index, row)
            sample.resizeColumnsToContents()
            widths = sum(sample.columnWidth(c) for c in range(sample.columnCount()))
            sample.deleteLater()
            typical = self._typical_widths[beside_exact] = widths + self._frame_width()
        # Rows wider than the typical one are shown already: the window's first share of its
        # width must not take their room back.
        return max(typical, self.needed_width() if self.table.rowCount() else 0)

    def refresh(self, *_: object) -> None:
        if not self.model.runs:  # nothing shown (a new plan, a failed run): no stale values
            self.table.setRowCount(0)
            self.title.setText("Click a pixel to read every run's exact value.")
            return
        pixel = self.model.selected_pixel
        if pixel is None:
            return
        row, column = pixel
        values = self.model.pixel_values(row, column)
        plane = f", class {self.model.class_index}" if self.model.multiclass else ""
        beside_exact = any(value.is_exact for value in values)
        undecidable = (
            "; float32 cannot decide its class (exact value within 1 ULP of the cutoff)"
            if self.model.undecidable(row, column)
            else ""
        )
        self.title.setText(f"Pixel row {row}, column {column}{plane}{undecidable}")
        self._set_headers((*_COLUMNS, _EXACT_COLUMN) if beside_exact else _COLUMNS)
        self.table.setRowCount(len(values))
        for index, value in enumerate(values):
            cells: tuple[str, ...] = (
                value.label
                + (" (reference)" if value.is_reference else "")
                + (" (exact)" if value.is_exact else ""),
                value.text,
                value.bits,
                f"{value.difference:+.9g}",
                f"{value.ulps:,}",
                f"{_class_text(value)}{_rightness(value)}",
            )
            if beside_exact:
                cells += ("—" if value.is_exact else f"{value.exact_ulps:,}",)
            fill_row(self.table, index, cells)
            name, mark = self.table.item(index, 0), self.table.item(index, _CLASS)
            assert name is not None and mark is not None  # fill_row made them
            name.setToolTip(tooltip_text(self._run_tip(value.key, cells[0])))
            # The mark alone in the table; its word in the tooltip and in a copy.
            said = f"{_class_text(value)}{_rightness(value, words=True)}"
            mark.setData(_FULL_TEXT, said)
            mark.setToolTip(said if said != cells[_CLASS] else "")
        labels = tuple(value.label for value in values)
        if labels != self._fitted_for:  # sizing asks every cell: only when the runs change
            self._fitted_for = labels
            self._fit_run_column()
            self._ask_for_room()

    def _ask_for_room(self) -> None:
        """Ask the window for the width the rows need, where they need more than there is."""
        needed = self.needed_width()
        if self.table.rowCount() and needed > self.width():
            self.widened.emit(needed)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        """Brought to the front (behind the runs until now, as on a laptop's screen, where
        rows arrived meanwhile): the room they need is asked for now."""
        super().showEvent(event)
        self._ask_for_room()

    def _set_headers(self, columns: tuple[tuple[str, str, str], ...]) -> None:
        """The columns, with the exact run's where one is shown (sized again when they
        change): short headers, each explained by its tooltip; the bits last."""
        table = self.table
        if columns == self._columns:
            return
        self._columns = columns
        table.setColumnCount(len(columns))
        for column, (_, header, tip) in enumerate(columns):
            item = QTableWidgetItem(header)
            item.setToolTip(tip)
            table.setHorizontalHeaderItem(column, item)
        sections = table.horizontalHeader()
        sections.moveSection(sections.visualIndex(_BITS), len(columns) - 1)
        self._fitted_for = ()

    def _run_tip(self, key: str, label: str) -> str:
        """The run's label and what it computed with (names come from files: see
        tooltip_text)."""
        record = self.model.records.get(key)
        if record is None:
            return label
        return "\n".join([label, *record.provenance.in_effect_lines(record.run_config)])

    def _column_width(self, column: int) -> int:
        """What ``column`` needs, asked of its contents (columns resize at the next layout)."""
        table = self.table
        return max(
            table.sizeHintForColumn(column), table.horizontalHeader().sectionSizeHint(column)
        )

    def _fit_run_column(self) -> None:
        """The run column gets its contents' width if there is room beside the numbers, else
        what is left (at least a readable few words, elided)."""
        others = sum(self._column_width(c) for c in range(1, self.table.columnCount()))
        room = self.table.viewport().width() - others
        self.table.setColumnWidth(0, max(min(self._column_width(0), room), _RUN_COLUMN_LEAST))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_run_column()

    def needed_width(self) -> int:
        """The width that shows every column of the rows the table holds now."""
        table = self.table
        columns = sum(self._column_width(c) for c in range(table.columnCount()))
        return columns + self._frame_width()

    def _frame_width(self) -> int:
        """What the inspector needs beside its columns: the table's frame and vertical scroll
        bar, and its own margins."""
        table = self.table
        frame = 2 * table.frameWidth() + table.verticalScrollBar().sizeHint().width()
        margins = self._layout.contentsMargins()
        slack = 4  # the grid's lines and a section's rounding: a pixel short is a scroll bar
        return frame + margins.left() + margins.right() + slack

    def as_tsv(self) -> str:
        """The table as tab-separated text, its columns in their first order, named whole."""
        table = self.table
        columns = range(table.columnCount())
        lines = ["\t".join((*HEADERS, EXACT_HEADER)[c] for c in columns)]
        for row in range(table.rowCount()):
            cells = []
            for column in columns:
                item = table.item(row, column)
                full = item.data(_FULL_TEXT) if item is not None else None
                cells.append(full if isinstance(full, str) else cell_text(table, row, column))
            lines.append("\t".join(cells))
        return "\n".join(lines) + "\n"

    def copy_tsv(self) -> None:
        QGuiApplication.clipboard().setText(self.as_tsv())


def _class_text(value: PixelValue) -> str:
    """The run's class at the pixel; ``0 tie`` where its top classes are exactly equal (argmax
    takes the lowest: no class decided)."""
    return f"{value.class_index} tie" if value.tied else f"{value.class_index}"


def _rightness(value: PixelValue, words: bool = False) -> str:
    """A float32 run's class against the exact map's: `` ✓`` right, `` ✗`` wrong (with
    ``words``: `` ✗ wrong``)."""
    if value.right is None or value.is_exact:
        return ""
    if value.right:
        return " ✓"
    if not words:
        return " ✗"
    return " ✗ wrong: no class decided" if value.tied else " ✗ wrong"
