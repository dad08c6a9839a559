"""The Explain dialog on a synthetic attribution: a softmax study is said at argmax, and a
step the runtime refuses alone offers nothing to run."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.attribution import attribute, plan_attribution
from segdiff_gui.core.config import RunConfig
from segdiff_gui.ui.attribution_view import AttributionDialog


def _softmax(shift: float) -> np.ndarray:
    logits = np.stack([np.linspace(0, 1, 64), np.full(64, 0.5), np.linspace(1, 0, 64)], -1)
    values = np.exp(logits.reshape(8, 8, 3) + shift)
    return (values / values.sum(-1, keepdims=True)).astype(np.float32)


def test_a_refused_step_is_shown_as_refused_with_nothing_to_run(qtbot) -> None:
    base, target = RunConfig(onednn=False), RunConfig(runtime="jax")
    plan = plan_attribution(base, target)
    maps = {config: [_softmax(0.01 * i)] for i, config in enumerate(plan.configs())}
    attribution = attribute(plan, lambda config: maps.get(config, []), 0.5)
    dialog = AttributionDialog(attribution, can_run=True)
    qtbot.addWidget(dialog)
    assert "at argmax" in dialog.title.text() and "cutoff" not in dialog.title.text()
    compared = [dialog.table.item(row, 3).text() for row in range(dialog.table.rowCount())]
    assert f"{base.label()} → refused" in compared
    assert dialog.run_button.isHidden()  # every configuration that can run has its run
    assert "Not measurable alone (runtime)" in dialog.missing.text()
