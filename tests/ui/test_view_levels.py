"""The colour scale of a view: shared by the views, or each view's own range, so that a
near-constant map and small differences beside large ones are seen (fast: synthetic runs)."""

from __future__ import annotations

import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.inspection import Loaded
from tests.exact_runs import study_run
from tests.factories import make_record, sealed


def test_a_near_constant_map_is_shown_on_its_own_range_when_asked(window):
    """A near-constant probability map showed as one flat colour on the 0–1 scale. The
    probability view offers the scale per view, as the difference views do (the one level
    box): each map then fills the colours over its own range, which its title and the colour
    bar say."""
    rng = np.random.default_rng(7)
    flat = (0.5 + rng.uniform(-3e-7, 3e-7, (16, 16))).astype(np.float32)
    other = np.nextafter(flat, np.float32(1))
    model, toolbar, grid = window.model, window.toolbar, window.grid
    model.loaded = Loaded(
        runs=(
            study_run("cpu b1", RunConfig(), flat),
            study_run("cpu b64", RunConfig(batch=64), other),
        )
    )
    assert model.mode.name == "probability" and model.level_mode == "shared"
    assert toolbar.level_action.isVisible()  # offered in the probability view too
    bar = grid.colour_bar.getAxis("left")
    assert grid.colour_bar.levels() == (0.0, 1.0) and "0 to 1" in bar.labelText
    images = [panel.data.image for panel in grid.panels.values()]
    assert all(np.unique(image).size <= 2 for image in images)  # one flat colour on 0–1

    toolbar.level_box.setCurrentIndex(1)
    assert model.level_mode == "per view"
    for panel, plane in zip(grid.panels.values(), (flat, other), strict=True):
        assert panel.data.image.min() == 0 and panel.data.image.max() == 255
        # The title names the range, its ends told apart, each within the span of its value.
        low, high = (float(end) for end in panel.title.whole.split(" · ")[1].split(" … "))
        span = float(plane.max()) - float(plane.min())
        assert low < high and abs(low - plane.min()) < span and abs(high - plane.max()) < span
    assert "each view's own range" in bar.labelText


def test_per_view_levels_show_small_differences_beside_large_ones(window, qtbot, tmp_path):
    """The difference view's shared scale was set by bf16's ±0.0103, so the 1e-7
    differences of batch and XLA were invisible."""
    from segdiff_gui.ui.view_modes import view_mode

    base = np.random.default_rng(2).random((16, 16), dtype=np.float32)
    small = np.nextafter(base, np.float32(2))  # one ULP everywhere: ~6e-8
    large = base + np.float32(0.0103)
    records = [
        make_record("m", base, "cpu b1 r0"),
        make_record("m", small, "cpu b64 r0"),
        sealed(make_record("m", large, "cpu b1 r0"), config=RunConfig(
            precision="mixed_bfloat16").to_dict()),
    ]  # fmt: skip
    records = [sealed(r) for r in records]
    cache = ResultCache(tmp_path / "runs")
    for record in records:
        cache.write_run(record)
    model = window.model
    model.set_runs(cache, records)
    model.mode = view_mode("difference")
    shared = model.mode.planes(model, model.reference)
    small_key = next(r.key for r in model.runs if r.label == "cpu b64 r0")
    assert shared.levels[small_key][1] == pytest.approx(0.0103, rel=1e-3)
    assert window.toolbar.level_action.isVisible()  # offered in this mode
    window.toolbar.level_box.setCurrentIndex(1)
    assert model.level_mode == "per view"
    own = model.mode.planes(model, model.reference)
    assert own.levels[small_key][1] < 1e-6  # the 1-ULP run fills its own colour range
    assert own.scale_text[small_key].startswith("±6")
    assert own.bar_label == "Δ / each view's ±max"
    titles = [panel.title.whole for panel in window.grid.panels.values()]
    assert any("cpu b64 r0 · ±6" in title for title in titles)
