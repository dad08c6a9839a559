"""Small widget helpers shared by the panels."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem

__all__ = ["fill_row", "read_only_table"]


def read_only_table(headers: Sequence[str]) -> QTableWidget:
    """A table for reading numbers: fitted columns, no row numbers, no editing."""
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    return table


def fill_row(table: QTableWidget, row: int, cells: Sequence[str]) -> None:
    for column, text in enumerate(cells):
        table.setItem(row, column, QTableWidgetItem(text))
