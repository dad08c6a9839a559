"""Diagnosis tab, attribution dialog and test-set sweep in the real window (offscreen)."""

import shutil

import numpy as np
import pytest
from PySide6.QtCore import Qt

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import RunConfig

pytestmark = pytest.mark.slow


def key_of(window, label):
    return next(run.key for run in window.model.runs if run.label == label)


def test_the_diagnosis_tab_follows_the_cutoff(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    panel = window.analysis.diagnosis
    assert panel.findings == []  # hidden: nothing computed
    window.tabs.setCurrentWidget(panel)  # shown: diagnosed off the GUI thread
    qtbot.waitUntil(lambda: bool(panel.findings), timeout=5000)
    text = " ".join(f.sentence for f in panel.findings)
    assert "precision policy alone" in text and "No GPU run was measured" in text
    assert "How to avoid it" in panel.toPlainText()
    window.toolbar.cutoff.spin.setValue(0.3)
    qtbot.waitUntil(lambda: any("cutoff 0.3" in f.sentence for f in panel.findings), timeout=3000)


def test_explaining_a_pair_shows_direct_comparisons_and_runs_what_is_missing(
    window_for, fake_demo_cache, qtbot, tmp_path, fake_engine
):
    root = tmp_path / "cache"
    shutil.copytree(fake_demo_cache.root, root)
    window = window_for("--cache", root, "--no-run")
    window.model.focus_key = key_of(window, "cpu b1 bf16 r0")
    window.analysis.explain()  # measured off the GUI thread
    qtbot.waitUntil(lambda: window.analysis.dialog is not None, timeout=10_000)
    dialog = window.analysis.dialog
    assert dialog.isVisible() and not dialog.run_button.isVisible()
    (alone,) = dialog.attribution.of("alone")
    maps = {run.label: run.probabilities for run in window.model.runs}
    direct = compare_maps(maps["cpu b1 r0"], maps["cpu b1 bf16 r0"], window.model.cutoff)
    assert (alone.effect.max_ulp, alone.effect.flips) == (direct.max_ulp, direct.flips)
    assert dialog.table.item(0, 1).text() == "precision"
    assert dialog.table.item(0, 7).text() == f"{direct.flips:,}"
    assert len(dialog.chart.listDataItems()) + len(dialog.chart.getPlotItem().items) > 0

    # Double-clicking a run in the statistics table explains that one.
    labels = [run.label for run in window.model.study.others]
    window.stats.table.cellDoubleClicked.emit(labels.index("cpu b64 r1"), 0)
    qtbot.waitUntil(lambda: dialog.attribution.plan.target == RunConfig(batch=64), timeout=10_000)
    assert [row.knob for row in dialog.attribution.of("alone")] == ["batch"]

    # From batch 64 to XLA at batch 1: "cpu b64 xla" has never run, so it is not measured.
    window.model.reference_key = key_of(window, "cpu b64 r0")
    window.model.focus_key = key_of(window, "cpu b1 xla r0")
    window.analysis.explain()
    qtbot.waitUntil(lambda: dialog.attribution.plan.base == RunConfig(batch=64), timeout=10_000)
    missing = [row for row in dialog.attribution.rows if row.effect is None]
    assert missing and dialog.run_button.isVisible()
    dialog.run_button.click()
    qtbot.waitUntil(
        lambda: window.worker is None and not dialog.run_button.isVisible(), timeout=120_000
    )
    assert all(row.effect is not None for row in dialog.attribution.rows)
    assert "cpu b64 xla r0" in [run.label for run in window.model.runs]  # it joined the views


def test_a_sweep_fills_a_sortable_table_and_a_row_opens_its_image(
    window_for, tmp_path, qtbot, fake_engine
):
    window = window_for("--cache", tmp_path / "cache", "--no-run")
    editor = window.run_panel.editor
    editor.load([RunConfig(), RunConfig(precision="mixed_bfloat16")], 1)
    window.sessions._matrix_edited()
    window._sweep_from_menu()
    panel = window.analysis.sweep_panel
    qtbot.waitUntil(lambda: panel.summary is not None, timeout=300_000)
    summary = panel.summary
    assert len(summary.images) == panel.items.rowCount() == 16
    headers = [panel.items.horizontalHeaderItem(i).text() for i in range(panel.items.columnCount())]
    assert "Dice · cpu b1 bf16" in headers and "flips · cpu b1 bf16" in headers
    # Sorted by flips, most first; the numbers are the summary's.
    flips = [int(panel.proxy.index(r, 1).data().replace(",", "")) for r in range(16)]
    assert flips == sorted(flips, reverse=True) and flips[0] > 0
    top = panel.proxy.index(0, 0).data()
    entry = next(i for i in summary.images if i.image == top).configurations["cpu b1 bf16"]
    assert flips[0] == entry.effect.flips
    assert "mean Dice" in panel.status.text()
    # The views showed the target all along; double-clicking a row shows that image instead.
    panel.table.doubleClicked.emit(panel.proxy.index(0, 0))
    qtbot.waitUntil(lambda: window.model.runs != [], timeout=5000)
    targets = {record.target_name for record in window.model.records.values()}
    assert targets == {top}
    column = headers.index("Dice · cpu b1")
    panel.table.sortByColumn(column, Qt.SortOrder.AscendingOrder)
    dice = [panel.proxy.index(r, column).data() for r in range(16)]
    assert [float(d) for d in dice] == sorted(float(d) for d in dice)
    assert np.isfinite(summary.rows()[0]["mean_dice"])
