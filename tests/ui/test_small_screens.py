"""The right-hand tables and the Explain dialog at the window's first sizes, on a laptop's
1366×768 screen and a 1600×1000 one: every header and cell whole and in view, beside an exact
run too (fast: synthetic runs, no child)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QRegion
from PySide6.QtWidgets import QLabel, QStyle

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.attribution_view import AttributionDialog
from segdiff_gui.ui.inspection import Loaded
from tests.exact_runs import CUT, bf16_study, study_run
from tests.factories import labelled_runs, sealed

# The window's first size on a 1366×768 screen (92% of it), that screen whole, the first size
# with no screen to ask, and the first size on a 1600×1000 screen.
LAPTOP_SIZES = [(1257, 707), (1366, 768), (1400, 860), (1472, 920)]


def _bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as float32."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def _demo_like_study_runs() -> Loaded:
    """The demo's matrix as the window shows it beside an exact run: its labels, and values
    as long as the demo's (float64 exact, bfloat16 far off, a few ULPs for XLA and batch 64)."""
    rng = np.random.default_rng(49)
    exact = 0.3 + 0.4 * rng.random((24, 24))
    exact[5, 5] = 0.49860265540317467
    cpu = exact.astype(np.float32)
    planes = {
        "cpu b1": (RunConfig(), cpu),
        "cpu b1 bf16": (RunConfig(precision="mixed_bfloat16"), _bfloat16(exact)),
        "cpu b1 threads1": (RunConfig(threads=1), cpu),
        "cpu b1 xla": (RunConfig(xla=True), np.nextafter(cpu, np.float32(1))),
        "cpu b64": (RunConfig(batch=64), np.nextafter(np.nextafter(cpu, 1), np.float32(1))),
    }
    runs = tuple(
        study_run(label, config, plane, repeat)
        for label, (config, plane) in planes.items()
        for repeat in (0, 1)
    )
    return Loaded(runs=runs, exact=study_run("cpu b1 fp64", RunConfig(precision="float64"), exact))


def _cut_texts(table) -> list[str]:
    """Every header and cell of ``table`` whose text is not shown whole: elided (narrower
    than its text, or, wrapped, lower than its lines), or out of the table's view (scrolled
    off, or beyond the part of the table on screen)."""
    style, header = table.style(), table.horizontalHeader()
    cut = []
    header_margin = style.pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    text_margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    shown = table.viewport().visibleRegion()
    for column in range(table.columnCount()):
        text = table.horizontalHeaderItem(column).text()
        needed = header.fontMetrics().horizontalAdvance(text) + 2 * header_margin
        if header.sectionSize(column) < needed:
            cut.append(f"header {text!r}: {header.sectionSize(column)} < {needed} pixels")
        metrics = table.fontMetrics()
        for row in range(table.rowCount()):
            item = table.item(row, column)
            if item is None or not item.text():
                continue
            rect = table.visualItemRect(item)
            width = rect.width() - 2 * text_margin
            if table.wordWrap():
                laid = metrics.boundingRect(
                    QRect(0, 0, width, 100_000), Qt.TextFlag.TextWordWrap, item.text()
                )
                fits = laid.width() <= width and laid.height() <= rect.height()
            else:
                fits = metrics.horizontalAdvance(item.text()) <= width
            if not fits:
                cut.append(f"cell {item.text()!r}: elided in {rect.width()}×{rect.height()}")
            elif shown.intersected(QRegion(rect)) != QRegion(rect):
                cut.append(f"cell {item.text()!r}: out of view at {rect}")
    return cut


def _label_cut(label: QLabel) -> bool:
    if label.wordWrap():
        return label.heightForWidth(label.width()) > label.height()
    return label.sizeHint().width() > label.width()


def _first_window(qtbot, tmp_path, monkeypatch, size, loaded=None):
    """The main window as a first launch opens it at ``size`` (no layout remembered): made,
    ``loaded`` shown (runs cached already), then shown and its width shared."""
    from PySide6.QtCore import QSettings

    from segdiff_gui.storage import ResultCache
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.window_layout import WindowLayout

    QSettings("segdiff", "segdiff-gui").clear()  # a first launch: no layout remembered
    monkeypatch.setattr(WindowLayout, "first_geometry", lambda layout: layout.window.resize(*size))
    window = MainWindow(InspectionModel(), ResultCache(tmp_path / "cache"))
    qtbot.addWidget(window)
    if loaded is not None:
        window.model.loaded = loaded
        window.model.selected_pixel = (5, 5)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(100)  # the width shared once shown
    assert (window.width(), window.height()) == size  # not widened past its first size
    return window


@pytest.mark.parametrize("size", LAPTOP_SIZES)
def test_on_a_laptop_screen_no_header_or_cell_of_the_inspector_or_statistics_is_cut(
    qtbot, tmp_path, monkeypatch, size
):
    """Beside an exact run, the Statistics tab showed about two rows, its "vs exact" cell
    wrapped onto five lines; the inspector's "vs exact" column was cut ("vs exa") and needed
    scrolling sideways. At the first size on a 1366×768 screen and the other first sizes, as
    the window shares its width the first time it is shown, every header and cell of both
    tables is whole and in view."""
    window = _first_window(qtbot, tmp_path, monkeypatch, size, _demo_like_study_runs())
    _assert_whole(window, qtbot, size)


@pytest.mark.parametrize("size", LAPTOP_SIZES[:3])
def test_on_a_laptop_screen_the_inspector_makes_room_for_an_exact_run_that_arrives_later(
    qtbot, tmp_path, monkeypatch, size
):
    """A first launch shares the width while the runs compute: the exact run's column and
    float64 value arrive later, and the inspector, stacked with the runs, widens for them."""
    window = _first_window(qtbot, tmp_path, monkeypatch, size)
    window.model.loaded = _demo_like_study_runs()
    window.model.selected_pixel = (5, 5)
    window.docks[1].raise_()  # in front of the runs, as a click on a pixel brings it
    qtbot.wait(100)
    _assert_whole(window, qtbot, size)


def _assert_whole(window, qtbot, size: tuple[int, int]) -> None:
    inspector = window.inspector.table
    assert inspector.rowCount() == 11 and inspector.columnCount() == 7
    assert _cut_texts(inspector) == []
    assert inspector.horizontalScrollBar().maximum() == 0
    window.tabs.setCurrentWidget(window.stats)
    qtbot.wait(100)
    stats = window.stats.table
    assert stats.rowCount() == 9 and stats.horizontalHeaderItem(6).text() == "vs exact"
    assert _cut_texts(stats) == []
    from segdiff_gui.ui.window_layout import maps_keep

    assert window.grid.width() >= maps_keep(size[0])  # the maps keep their share


# The window's first size on a 1600×1000 screen and on a 1366×768 one (92% of what is free).
@pytest.mark.parametrize("size", [(1472, 920), (1313, 707)])
def test_beside_an_exact_run_class_and_ulps_from_exact_are_in_view_at_the_first_size(
    window, qtbot, size
):
    """The Inspector's class (``1 ✓`` / ``0 ✗ wrong``) and ULPs from exact
    were behind a horizontal scroll bar at the window's first size; the Statistics tab cut
    its "vs exact" column. Only the bits may be out of view now; the copy keeps every column,
    in its order and words."""
    window.resize(*size)
    study = bf16_study()
    window.model.cutoff = CUT
    window.model.loaded = Loaded(runs=tuple(study.runs), exact=study.exact)
    window.model.selected_pixel = (0, 1)  # the reference's class is wrong there
    window._share_width()
    qtbot.wait(100)
    table = window.inspector.table
    assert table.columnCount() == 7
    for column in (0, 1, 3, 4, 5, 6):  # run, value, Δ, ULPs, class, ULPs from exact
        right = table.columnViewportPosition(column) + table.columnWidth(column)
        assert table.columnViewportPosition(column) >= 0 and right <= table.viewport().width()
    rows = [line.split("\t") for line in window.inspector.as_tsv().splitlines()]
    assert rows[0] == ["run", "value", "bits", "Δ to reference", "ULPs", "class", "ULPs from exact"]
    assert rows[1][0] == "cpu r0 (reference)" and rows[1][5] == "1 ✗ wrong"
    assert table.item(0, 5).text() == "1 ✗" and table.item(0, 5).toolTip() == "1 ✗ wrong"

    window.tabs.setCurrentWidget(window.stats)
    qtbot.wait(100)
    stats = window.stats.table
    assert stats.horizontalHeaderItem(6).text() == "vs exact"
    assert stats.horizontalScrollBar().maximum() == 0
    summary = stats.item(0, 6)
    needed = stats.fontMetrics().boundingRect(
        QRect(0, 0, stats.columnWidth(6) - 8, 1000), Qt.TextFlag.TextWordWrap, summary.text()
    )
    assert stats.rowHeight(0) >= needed.height()  # wrapped whole, not cut


def test_the_inspectors_columns_stay_in_view_with_long_labels_on_a_1600_screen(window, qtbot):
    """Δ, ULPs and class were off the right edge until the splitter was dragged."""
    long = RunConfig(
        batch=64, context="copies", position=3, determinism=True, onednn=False, threads=8,
        xla=True, precision="mixed_bfloat16",
    )  # fmt: skip
    records = labelled_runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0"])
    records.append(sealed(records[1], config=long.to_dict(), repeat=1))
    cache = ResultCache(window.cache.root.parent / "runs")
    for record in records:
        cache.write_run(record)
    window._share_width()
    qtbot.wait(50)
    window.model.set_runs(cache, records)
    window.model.selected_pixel = (3, 4)
    qtbot.wait(100)
    table = window.inspector.table
    assert table.rowCount() == 3 and "threads8" in table.item(2, 0).text()
    assert table.horizontalScrollBar().maximum() == 0  # every column in view
    # A layout remembered from a narrower session is widened when the window is shown again.
    from PySide6.QtCore import Qt

    window.resizeDocks([window.docks[1]], [240], Qt.Orientation.Horizontal)
    window.hide()
    window.show()
    qtbot.wait(100)
    assert table.horizontalScrollBar().maximum() == 0
    assert window.grid.width() >= 320


def test_the_explain_dialogs_heading_is_whole_on_a_1366_screen(window, qtbot):
    """The Explain dialog's heading ran off its right edge."""
    from segdiff_gui.core.attribution import attribute, plan_attribution

    base, target = RunConfig(), RunConfig(precision="mixed_bfloat16")
    plan = plan_attribution(base, target)
    rng = np.random.default_rng(3)
    maps = {config: [rng.random((8, 8), dtype=np.float32)] for config in plan.configs()}
    dialog = AttributionDialog(attribute(plan, lambda c: maps.get(c, []), 0.5), True, window)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.width() <= 1366 and dialog.height() <= 768
    assert "What moves cpu b1 to cpu b1 bf16" in dialog.title.text()
    assert not _label_cut(dialog.title)
