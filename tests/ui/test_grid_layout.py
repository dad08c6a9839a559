"""How the grid lays the runs out: the columns that make each view largest, whatever happens."""

import pytest

from segdiff_gui.ui.grid_panels import COLOUR_BAR_ROOM as _COLOUR_BAR_ROOM
from segdiff_gui.ui.grid_panels import best_columns, crosshair_segments


def test_the_grid_takes_the_columns_that_make_each_view_largest():
    assert best_columns(10, (1600, 400), (256, 256)) == 5  # wide: 5 × 2
    assert best_columns(10, (400, 1600), (256, 256)) == 2  # tall: 2 × 5
    assert best_columns(4, (800, 800), (256, 256)) == 2
    assert best_columns(4, (800, 800), (64, 1024)) == 1  # wide images stack
    assert best_columns(1, (10, 10), (8192, 8192)) == 1
    assert best_columns(3, (0, 0), (256, 256)) in (1, 2, 3)  # a grid not laid out yet


@pytest.mark.slow
def test_the_runs_are_rearranged_to_fill_a_wide_or_a_tall_grid(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    grid = window.grid

    def best():
        room = (grid.width() - _COLOUR_BAR_ROOM, grid.height())
        return best_columns(
            10, room, (256, 256), grid._title_height + 2 * grid.ci.layout.verticalSpacing()
        )

    columns = {}
    for shape in ("wide", "tall"):
        for dock in window.docks:  # the docks make room, or take it
            dock.setVisible(shape == "tall")
        window.resize(1900 if shape == "wide" else 1100, 500 if shape == "wide" else 1000)
        qtbot.waitUntil(lambda: grid._columns == best())
        columns[shape] = grid._columns
        views = [panel.view for panel in grid.panels.values()]
        assert max(v.width() for v in views) - min(v.width() for v in views) <= 1
        # Every run is in its own cell, in order, row by row.
        cells = [(round(v.pos().y()), round(v.pos().x())) for v in views]
        assert cells == sorted(cells) and len(set(cells)) == 10
        qtbot.wait(50)
        (x0, x1), (y0, y1) = views[-1].viewRange()
        assert x0 <= 0 and x1 >= 256 and y0 <= 0 and y1 >= 256  # still the whole image
    assert columns["wide"] >= 5 and columns["tall"] <= 3, columns


@pytest.mark.slow
@pytest.mark.parametrize("readable", [0, 2])
def test_a_load_that_failed_part_way_leaves_the_grid_as_it_was(
    window_for, fake_demo_cache, qtbot, readable
):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    shown = len(window.grid.panels)

    class Damaged:
        """A store whose runs after the first ``readable`` cannot be read (a damaged file)."""

        def __init__(self):
            self.read = 0

        def read_run(self, key, with_map=True):
            self.read += 1
            if self.read > readable:
                raise OSError(f"run {key[:8]} is damaged")
            return fake_demo_cache.read_run(key, with_map)

    runs = window.model.runs
    with pytest.raises(OSError, match="damaged"):
        window.model.set_runs(Damaged(), fake_demo_cache.records())
    # Nothing was written: the model keeps the runs it showed, and the grid its panels.
    assert window.model.runs is runs and len(window.grid.panels) == shown == len(runs)
    # A resize lays out the panels there are (an exception in a resize event ends the app).
    for size in ((900, 1200), (1900, 500)):
        window.resize(*size)
        qtbot.wait(50)
        window.grid._arrange()
    assert len(window.grid.panels) == shown


def test_the_crosshair_spans_the_image_and_leaves_the_chosen_pixel_clear():
    xs, ys = crosshair_segments((10, 20), (64, 128), gap=2.0)
    points = list(zip(xs, ys, strict=True))
    pairs = list(zip(points[0::2], points[1::2], strict=True))
    assert len(pairs) == 4
    for (x0, y0), (x1, y1) in pairs:
        assert 0 <= x0 <= 128 and 0 <= x1 <= 128 and 0 <= y0 <= 64 and 0 <= y1 <= 64
        assert x0 == x1 == 20.5 or y0 == y1 == 10.5  # through the pixel's centre
        # No segment comes within the gap of the pixel's square [20, 21] × [10, 11].
        if x0 == x1:
            assert max(y0, y1) <= 10 - 2 or min(y0, y1) >= 11 + 2
        else:
            assert max(x0, x1) <= 20 - 2 or min(x0, x1) >= 21 + 2
    corner_xs, _ = crosshair_segments((0, 0), (64, 128), gap=2.0)
    assert len(corner_xs) == 4  # at a corner, only the segments below and to the right


@pytest.mark.slow
def test_every_view_draws_the_crosshair_through_the_chosen_pixel(
    window_for, fake_demo_cache, qtbot
):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.model.selected_pixel = (100, 60)
    qtbot.wait(50)
    for panel in window.grid.panels.values():
        xs, ys = panel.crosshair.getData()
        assert 60.5 in xs and 100.5 in ys
        assert xs.min() >= 0 and xs.max() <= 256 and ys.min() >= 0 and ys.max() <= 256
