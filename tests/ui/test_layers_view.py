"""The Layers tab and the layer's map in the grid: built alone from synthetic comparisons
(fast), then once in the real window on a real probe of the demo."""

from __future__ import annotations

import shutil
import threading
import weakref
from dataclasses import replace

import numpy as np
import pytest

from segdiff_gui.core.layer_stats import LAYER_COLUMNS, LayerComparison, compare_layer
from segdiff_gui.core.repair import RepairResult, Trial, repair_code
from segdiff_gui.runner.layers import LayerProbe
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.layers import StoredComparison
from segdiff_gui.ui.grid_view import ProbabilityGridView
from segdiff_gui.ui.inspection import InspectionModel, LayerMap
from segdiff_gui.ui.layers_view import LayersPanel
from segdiff_gui.ui.repair_view import RepairDialog
from tests.factories import make_record


def _probe() -> LayerProbe:
    rng = np.random.default_rng(4)
    same = rng.random((8, 8, 2), dtype=np.float32)
    moved = same.copy()
    moved[2, 3, 1] += 1e-4
    layers = (
        compare_layer("conv", same, same.copy()),
        compare_layer("norm", same, moved),
        compare_layer("out", same, moved * 2),
    )
    spatial = {1: np.abs(moved - same).max(axis=-1), 2: np.abs(2 * moved - same).max(axis=-1)}
    final = (np.full((8, 8), 0.4, np.float32), np.full((8, 8), 0.6, np.float32))
    stored = StoredComparison(
        "e" * 64, {"label": "cpu b1 r0", "final": {"bitwise_equal": True}},
        {"label": "cpu b64 r0", "final": {"bitwise_equal": True}},
        LayerComparison(layers), spatial, final, "plain runs",
    )  # fmt: skip
    return LayerProbe(stored, tensors_kept=True, served_from_cache=False)


def test_the_table_marks_the_first_differing_layer_and_choosing_a_layer_says_which(qtbot):
    panel = LayersPanel()
    qtbot.addWidget(panel)
    probe = _probe()
    chosen = []
    panel.layer_chosen.connect(chosen.append)
    panel.show_probe(probe, probe.sentences(0.5))
    assert panel.table.rowCount() == 3
    assert panel.table.item(1, 0).text() == "▶ 1" and panel.table.item(0, 0).text() == "0"
    assert chosen == [1]  # the first differing layer is chosen at once
    assert (
        "born in norm" in panel.summary.text() and "64 flips at cutoff 0.5" in panel.summary.text()
    )
    panel.table.selectRow(2)
    assert chosen == [1, 2]
    assert "cpu b1 r0 → cpu b64 r0" in panel.title.text()
    assert panel.budgets() == (512 << 20, 2 << 30)  # the command line's defaults
    panel.memory.setValue(64)
    panel.keep.setValue(0.5)
    assert panel.budgets() == (64 << 20, 1 << 29)


def test_an_int8_artefact_s_layers_show_their_scale_zero_point_and_steps(qtbot):
    """Against its Keras source, the user's int8 artefact's tensors say the scale and zero point
    they were quantized with, and the error in steps of that scale; a float probe after it
    shows the plain columns again."""
    panel = LayersPanel()
    qtbot.addWidget(panel)
    probe = _probe()
    layers = probe.comparison.layers
    quantized = (replace(layers[0], scale=0.5, zero_point=-128, node="1"), *layers[1:])
    stored = replace(probe.stored, comparison=replace(probe.comparison, layers=quantized))
    panel.show_probe(LayerProbe(stored, True, False), [])
    headers = [panel.table.horizontalHeaderItem(i).text() for i in range(panel.table.columnCount())]
    assert headers[-4:] == ["scale", "zero pt", "max steps", "mean steps"]
    row = [panel.table.item(0, i).text() for i in range(panel.table.columnCount())]
    assert row[-4:] == ["0.5", "-128", "0", "0"]  # the same values: no step apart
    assert [panel.table.item(1, i).text() for i in range(10, 14)] == ["", "", "", ""]
    panel.show_probe(probe, [])
    assert panel.table.columnCount() == len(LAYER_COLUMNS)


def _grid_of_runs(qtbot, tmp_path):
    """A grid alone (no window: nothing else holds it) of two runs, and their cache."""
    model = InspectionModel()
    grid = ProbabilityGridView(model)
    qtbot.addWidget(grid)
    cache = ResultCache(tmp_path / "cache")
    records = [
        make_record("m", np.random.default_rng(i).random((16, 16), dtype=np.float32), label)
        for i, label in enumerate(("cpu b1 r0", "cpu b64 r0"))
    ]
    for record in records:
        cache.write_run(record)
    model.set_runs(cache, records)
    return model, grid, cache, records


def test_a_chosen_layer_gets_a_panel_of_its_own_beside_the_runs(qtbot, tmp_path):
    # Left to pytest-qt's teardown, this grid crashed the process (SIGSEGV in processEvents)
    # when the numpy pool let go of it last: see the next test.
    model, grid, cache, records = _grid_of_runs(qtbot, tmp_path)
    assert grid.layer_panel is None and len(grid.panels) == 2
    values = np.zeros((8, 8), np.float32)
    values[1, 2] = 1e-6
    model.layer_map = LayerMap("encoder/conv", values, "cpu b1 r0 → cpu b64 r0")
    assert grid.layer_panel is not None and len(grid.panels) == 2
    shown = grid.layer_panel.data
    assert shown.image.shape == (8, 8)
    # Stretched over the 16×16 image: the layer's pixel (1, 2) covers the image's (2–3, 4–5).
    assert shown.mapRectToParent(shown.boundingRect()).width() == pytest.approx(16)
    assert shown.image[1, 2] == pytest.approx(-6) and shown.image[0, 0] == pytest.approx(-12)
    assert "encoder/conv" in grid.layer_panel.title.whole
    model.set_runs(cache, records)  # another image's runs: the layer is gone
    assert grid.layer_panel is None


def test_a_grid_let_go_of_is_destroyed_at_once_in_the_gui_thread(
    qtbot, tmp_path, pool_that_holds_on
):
    # The grid draws its maps through thread_map, with functions that hold the grid. A pool
    # thread that let go of one last destroyed the grid, its scene and its items in that thread
    # while the GUI thread painted them (the test above: 3 crashes in 48 runs).
    model, grid, _, _ = _grid_of_runs(qtbot, tmp_path)
    released = []
    weakref.finalize(grid, lambda: released.append(threading.current_thread().name))
    model.cutoff = 0.25  # the flips drawn again (through thread_map), as the user drags it
    del grid
    assert released == [threading.current_thread().name]  # the pool holds nothing of it


def test_the_repair_dialog_keeps_qdialogs_result(qtbot):
    """mypy on the window found the repair's result stored over QDialog.result()."""
    from PySide6.QtWidgets import QDialog

    trial = Trial((), 0, 0, 0)
    dialog = RepairDialog(
        RepairResult("mixed_bfloat16", "cpu b1", trial, trial, 0, 0.5, (), 1, ()), ""
    )
    qtbot.addWidget(dialog)
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted


def test_the_repair_dialog_lists_the_trials_and_offers_the_code(qtbot):
    before = Trial((), 16, 900, 60_000, "cpu b1 bf16")
    trials = (Trial(("a",), 9, 500, 50_000), Trial(("a", "b"), 0, 0, 0))
    result = RepairResult(
        "mixed_bfloat16", "cpu b1", before, trials[1], 0, 0.5, trials, 2, ("a", "b")
    )
    dialog = RepairDialog(result, repair_code("m.keras", "mixed_bfloat16", ("a", "b")))
    qtbot.addWidget(dialog)
    assert dialog.table.rowCount() == 2 and dialog.table.item(1, 4).text() == "a, b"
    assert "from 16 to 0" in dialog.summary.text() and "every layer" in dialog.summary.text()
    assert "1 layer: 9 flips" in dialog.summary.text() and "&#x27;" not in dialog.summary.text()
    assert "KEEP_FLOAT32" in dialog.code_view.toPlainText() and dialog.run_button.isEnabled()
    asked = []
    dialog.show_run.connect(lambda: asked.append(True))
    dialog.run_button.click()
    assert asked == [True]


@pytest.mark.slow
def test_probing_from_the_window_shows_the_demo_layers(
    window_for, fake_demo_cache, qtbot, tmp_path
):
    root = tmp_path / "cache"
    shutil.copytree(fake_demo_cache.root, root)
    window = window_for("--cache", root, "--no-run")
    bf16 = next(run.key for run in window.model.runs if run.label == "cpu b1 bf16 r0")
    window.model.focus_key = bf16
    window._probe_layers()  # Analysis → Layers (Ctrl+L)
    panel = window.analysis.layers_panel
    assert window.tabs.currentWidget() is panel
    qtbot.waitUntil(lambda: panel.probe is not None, timeout=180_000)
    assert panel.table.rowCount() == 17 and panel.table.item(0, 1).text() == "enc1_1"
    assert window.grid.layer_panel is not None  # the first differing layer, beside the runs
    assert "born in enc1_1" in panel.summary.text()
    window.model.focus_key = bf16
    window._probe_layers()  # again: from the cache, no child
    qtbot.waitUntil(lambda: "from the cache" in panel.status.text(), timeout=10_000)
    # Repair, allowing as many flips as bfloat16 has: nothing to keep, at once.
    assert panel.repair_button.isEnabled()
    flips = panel.probe.final(window.model.cutoff).flips
    panel.bound.setValue(flips)
    panel.repair_button.click()
    qtbot.waitUntil(lambda: window.analysis.repair_dialog is not None, timeout=60_000)
    dialog = window.analysis.repair_dialog
    assert "nothing to repair" in dialog.summary.text() and not dialog.run_button.isEnabled()
