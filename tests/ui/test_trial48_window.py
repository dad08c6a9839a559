"""What a new-user trial of an outside U-Net found in the window: a read-only cache, the
right-hand tables at the default size, the matrix's typo message and the image captions."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QIcon, QPixmap

from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.ui.inspection import Loaded
from tests.conftest import copy_labelled, read_only
from tests.exact_runs import CUT, bf16_study


def test_a_read_only_cache_shows_its_runs_and_refuses_only_the_missing_ones(
    window_for, fake_demo_cache, tmp_path, monkeypatch, engine_starts
):
    """Finding 5: the window said the runs of a read-only cache could be read, and showed
    none (the run list empty, the view black). Its cached run is shown; the one it lacks is
    marked, and Run missing is disabled with the reason as its tooltip."""
    cache = copy_labelled(fake_demo_cache, tmp_path / "cache", {"cpu b1 r0"})
    read_only(monkeypatch, cache)
    reason = f"{cache.root}: cannot be written (Read-only file system): the runs it holds"
    window = window_for(
        "--cache", cache.root, demo_model(), *demo_images(),
        "--config", "batch=1", "--config", "threads=1", "--repeats", "1",
    )  # fmt: skip
    assert [run.label for run in window.model.runs] == ["cpu b1 r0"]
    panel = window.run_panel
    rows = [panel.runs.item(i).text() for i in range(panel.runs.count())]
    assert rows == ["● cpu b1 r0 — cached", "✕ cpu b1 threads1 r0 — cannot be stored"]
    assert panel.matrix_bar.format() == "1 cached, 1 cannot be stored"
    assert not panel.run_button.isEnabled()
    assert reason in panel.run_button.toolTip()
    assert panel.problem.isVisible() and panel.problem.text().startswith(reason)
    assert engine_starts == []


def test_a_typo_in_the_matrix_is_said_whole_in_view_under_the_line_typed(
    window_for, fake_demo_cache, qtbot
):
    """Finding 12: the message for ``xlaa=on`` / ``batch=two`` was right, but sat below the
    fold of the editors' scroll area, cut off after its first words. It is scrolled into
    view, every wrapped line of it."""
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.docks[0].raise_()  # the Runs tab, in front of the inspector on a narrow window
    panel = window.run_panel
    panel.editors.verticalScrollBar().setValue(0)  # the matrix's top in view, as opened
    panel.editor.extra.setPlainText("xlaa=on\nbatch=two")
    label = panel.editor.extra_problem
    qtbot.waitUntil(lambda: label.isVisible(), timeout=5000)
    assert "unknown config key 'xlaa'" in label.text() and "'two'" in label.text()
    assert not panel.run_button.isEnabled()
    viewport = panel.editors.viewport()

    def in_view() -> bool:
        top_left = label.mapTo(viewport, QPoint(0, 0))
        return viewport.rect().contains(QRect(top_left, label.size()))

    qtbot.waitUntil(in_view, timeout=5000)
    assert label.height() >= label.heightForWidth(label.width())  # wrapped, none cut


def test_image_captions_never_touch(window_for, fake_demo_cache, tmp_path):
    """Finding 12: the captions ``ihc.png`` and ``chelsea.png`` ran together. Each caption
    keeps to a cell of its own, long names cut in the middle (the whole name its tooltip)."""
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.docks[0].raise_()  # the Runs tab, in front of the inspector on a narrow window
    panel = window.run_panel
    names = ["ihc.png", "chelsea.png", "astronaut.png", "a_much_longer_image_name_than_fits.png"]
    picture = QPixmap(56, 56)
    picture.fill()
    panel.set_images(names, [QIcon(picture)] * len(names), 1)
    images = panel.images
    metrics = images.fontMetrics()
    captions = [images.item(i).text() for i in range(images.count())]
    spans = []  # each caption's pixels, centred in its item
    for index, caption in enumerate(captions):
        centre = images.visualItemRect(images.item(index)).center().x()
        half = metrics.horizontalAdvance(caption) / 2
        spans.append((centre - half, centre + half))
    for (_, left_end), (right_start, _) in zip(spans, spans[1:], strict=False):
        assert right_start - left_end >= 8, spans
    # The gap is around each item, above and below too: the captions are not cut at the
    # list's bottom (the reread: the row grew by the gap, the list did not).
    bottoms = [images.visualItemRect(images.item(i)).bottom() for i in range(images.count())]
    assert max(bottoms) < images.viewport().height(), (bottoms, images.viewport().height())
    assert captions[:3] == ["ihc.png", "◎ chelsea.png", "astronaut.png"]
    assert "…" in captions[3] and captions[3].endswith(".png")
    assert images.item(3).toolTip().startswith(names[3])


# The window's first size on a 1600×1000 screen and on a 1366×768 one (92% of what is free).
@pytest.mark.parametrize("size", [(1472, 920), (1313, 707)])
def test_beside_an_exact_run_class_and_ulps_from_exact_are_in_view_at_the_first_size(
    window, qtbot, size
):
    """Finding 10: the Inspector's class (``1 ✓`` / ``0 ✗ wrong``) and ULPs from exact
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
