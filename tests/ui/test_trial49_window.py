"""What a new user hit in the window (issue 49): failures said where the user looks, the
right-hand tables and the Explain dialog laid out for a 1366×768 screen, a near-constant map
on its own range, and the cutoff offered only where it decides (fast: synthetic runs and the
fake engine)."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.ui.inspection import Loaded
from tests.exact_runs import study_run


def _softmax(rng: np.random.Generator, shape: tuple[int, int] = (12, 10)) -> np.ndarray:
    logits = rng.normal(size=(*shape, 3)).astype(np.float32)
    exps = np.exp(logits)
    return (exps / exps.sum(axis=-1, keepdims=True)).astype(np.float32)


def test_the_cutoff_is_disabled_for_a_softmax_map_and_says_why(window):
    """The cutoff stayed active for softmax maps, whose class argmax decides: it is disabled,
    its tooltip saying why, and offered again when a binary study is shown."""
    rng = np.random.default_rng(49)
    softmax = _softmax(rng)
    window.model.loaded = Loaded(
        runs=(
            study_run("cpu", RunConfig(), softmax),
            study_run("bf16", RunConfig(precision="mixed_bfloat16"), softmax[:, :, ::-1].copy()),
        )
    )
    cutoff = window.toolbar.cutoff
    for control in (cutoff.slider, cutoff.spin):
        assert not control.isEnabled()
        assert "argmax" in control.toolTip() and "softmax" in control.toolTip()
    sigmoid = rng.random((12, 10), dtype=np.float32)
    window.model.loaded = Loaded(runs=(study_run("cpu", RunConfig(), sigmoid),))
    for control in (cutoff.slider, cutoff.spin):
        assert control.isEnabled()
        assert "argmax" not in control.toolTip()


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
        low, high = (format_float32(v) for v in (plane.min(), plane.max()))
        assert panel.title.whole.endswith(f" · {low} … {high}"), panel.title.whole
    assert "each view's own range" in bar.labelText
