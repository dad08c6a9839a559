"""What a new user hit in the window (issue 49): failures said where the user looks, the
right-hand tables and the Explain dialog laid out for a 1366×768 screen, a near-constant map
on its own range, and the cutoff offered only where it decides (fast: synthetic runs and the
fake engine)."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
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
