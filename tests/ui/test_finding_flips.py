"""Finding the flips: each flip ringed at a size in screen pixels whatever
the zoom, N and P walking from the pixel on show to each flip, centred and zoomed in to be
seen, and the walk keys working whichever control has the keyboard but a field where letters
are typed. On synthetic runs: no TensorFlow child."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.grid_panels import MARK_SIZE
from segdiff_gui.ui.grid_view import READABLE_PIXEL
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.level_indices import MARKS_AT_MOST, flip_marks, pooled_any
from tests.factories import make_record


def flipping_runs(shape: tuple[int, int], flips: dict[tuple[int, int], float]) -> list:
    """A reference of 0.2 everywhere and a run that differs at ``flips``: each pixel's two
    values straddle its cutoff (0.4 or 0.5), so it flips at that cutoff only."""
    reference = np.full(shape, 0.2, np.float32)
    other = reference.copy()
    for (row, column), cutoff in flips.items():
        reference[row, column] = np.float32(cutoff - 1e-4)
        other[row, column] = np.float32(cutoff + 1e-4)
    return [make_record("m", reference, "cpu b1 r0"), make_record("m", other, "cpu b64 r0")]


def shown(model: InspectionModel, records: list, tmp_path) -> None:
    cache = ResultCache(tmp_path / "runs")
    for record in records:
        cache.write_run(record)
    model.set_runs(cache, records)


def test_the_walk_goes_on_from_the_pixel_on_show_in_reading_order(tmp_path):
    model = InspectionModel()
    flips = {(3, 30): 0.5, (3, 4): 0.5, (20, 1): 0.5, (9, 9): 0.4}
    shown(model, flipping_runs((32, 40), flips), tmp_path)
    assert model.flip_step(+1, None).sentence() == "flip 1 of 3 at row 3, column 4"
    assert model.flip_step(-1, None).sentence() == "flip 3 of 3 at row 20, column 1"
    step = model.flip_step(+1, (3, 4))  # from a flip: the next one
    assert (step.row, step.column, step.number) == (3, 30, 2)
    step = model.flip_step(+1, (10, 0))  # from a clicked pixel: the next after it
    assert (step.row, step.column) == (20, 1)
    step = model.flip_step(-1, (10, 0))  # and the one before it
    assert (step.row, step.column) == (3, 30)
    assert model.flip_step(+1, (20, 1)).number == 1  # round again
    assert model.flip_step(-1, (3, 4)).number == 3
    model.cutoff = 0.4  # the walk follows the flips of the cutoff now
    assert model.flip_step(+1, (20, 1)).sentence() == "flip 1 of 1 at row 9, column 9"
    model.cutoff = 0.3
    assert model.flip_step(+1, None) is None


def test_marks_ring_each_block_of_flips_at_its_centre_while_few():
    mask = np.zeros((10, 13), bool)
    mask[0, 0] = mask[9, 12] = True  # the second in an edge block, 2 × 1 pixels of the map
    x, y = flip_marks(pooled_any(mask, 4), 4, mask.shape)
    assert list(zip(x, y, strict=True)) == [(2.0, 2.0), (12.5, 9.0)]
    x, y = flip_marks(mask, 1, mask.shape, count=2)  # unpooled: each pixel's centre
    assert list(zip(x, y, strict=True)) == [(0.5, 0.5), (12.5, 9.5)]
    many = np.ones((20, 20), bool)  # more than the marks' limit: the overlay shows them
    assert many.sum() > MARKS_AT_MOST and flip_marks(many, 1, many.shape)[0].size == 0
    assert flip_marks(np.zeros((4, 4), bool), 1, (4, 4))[0].size == 0


def test_a_single_flip_of_a_large_map_is_ringed_in_screen_pixels_at_every_zoom(
    window, qtbot, tmp_path
):
    model, grid = window.model, window.grid
    shown(model, flipping_runs((2048, 2048), {(1500, 333): 0.5}), tmp_path)
    reference, other = (grid.panels[run.key] for run in model.runs)
    # A map pixel is a fraction of a screen pixel here: the overlays are pooled to the zoom
    # once the layout (the colour bar's label among it) has settled.
    qtbot.waitUntil(lambda: grid._overlay_factor >= 4, timeout=5000)
    assert len(reference.marks.data) == 0
    (ring,) = other.marks.data
    # Around the flip, to within the block a screen pixel covers, and MARK_SIZE across.
    assert abs(ring["x"] - 333.5) <= grid._overlay_factor / 2
    assert abs(ring["y"] - 1500.5) <= grid._overlay_factor / 2
    assert ring["size"] == -1 and other.marks.opts["size"] == MARK_SIZE  # -1: the item's size
    assert other.marks.opts["pxMode"]  # screen pixels, whatever the zoom
    # Zoomed in to the flip: the ring is on the pixel itself and goes round it.
    grid.show_pixel(1500, 333)
    qtbot.waitUntil(lambda: grid._overlay_factor == 1, timeout=5000)
    (ring,) = other.marks.data
    assert (ring["x"], ring["y"]) == (333.5, 1500.5)
    pixel = 1 / grid._map_units_per_screen_pixel()
    assert pixel >= READABLE_PIXEL - 0.01
    assert other.marks.opts["size"] >= max(MARK_SIZE, pixel * 2**0.5)
    model.cutoff = 0.6  # no flip at this cutoff: no ring
    assert len(other.marks.data) == 0


def test_n_after_typing_a_cutoff_walks_at_that_cutoff_and_letters_stay_in_text_fields(
    window, qtbot, tmp_path
):
    flips = {(200, 40): 0.5, (30, 220): 0.4, (250, 250): 0.4}
    shown(window.model, flipping_runs((256, 256), flips), tmp_path)
    window.activateWindow()
    qtbot.waitActive(window)
    qtbot.wait(100)  # the views fit the image once the layout settles
    assert window.model.selected_pixel == (200, 40)  # chosen for the user: the flip at 0.5
    spin = window.toolbar.cutoff.spin
    spin.setFocus()
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin.lineEdit(), "0.4")  # typed, without Enter
    assert window.model.cutoff == 0.5
    qtbot.keyClick(spin, Qt.Key.Key_N)
    assert spin.hasFocus() and window.model.cutoff == pytest.approx(0.4)
    assert window.model.selected_pixel == (30, 220)  # the first flip at the typed cutoff
    assert window.statusBar().currentMessage() == "flip 1 of 2 at row 30, column 220"
    view = next(iter(window.grid.panels.values())).view
    (x0, x1), (y0, y1) = view.viewRange()
    assert (x0 + x1) / 2 == pytest.approx(220.5) and (y0 + y1) / 2 == pytest.approx(30.5)
    assert 1 / window.grid._map_units_per_screen_pixel() >= READABLE_PIXEL - 0.01
    qtbot.keyClick(spin, Qt.Key.Key_N)
    assert window.model.selected_pixel == (250, 250)
    qtbot.keyClick(spin, Qt.Key.Key_P)
    assert window.model.selected_pixel == (30, 220)
    # A field where letters are typed keeps them: the matrix editor's configuration lines.
    extra = window.run_panel.editor.extra
    extra.setFocus()
    qtbot.keyClicks(extra, "precision=n")
    assert extra.toPlainText().endswith("precision=n")
    assert window.model.selected_pixel == (30, 220)


def test_runs_gone_while_the_zoom_settles_leave_no_ring_to_size(window, qtbot, tmp_path):
    shown(window.model, flipping_runs((64, 64), {(3, 4): 0.5}), tmp_path)
    window.grid.show_pixel(3, 4)  # the rings are sized once the zoom settles...
    window.model.set_runs(ResultCache(tmp_path / "runs"), [])  # ...and the runs are gone
    qtbot.wait(200)
    assert window.grid.panels == {}
