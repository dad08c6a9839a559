"""The Explain dialog on a synthetic attribution: a softmax study is said at argmax, and a
step the runtime refuses alone offers nothing to run; in the window (synthetic runs, no child),
it follows the cutoff."""

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


def test_the_explain_window_follows_the_cutoff_for_the_pair_it_explains(window, qtbot, tmp_path):
    """The dialog kept the flips of the cutoff it was opened at."""
    from segdiff_gui.core.analysis import compare_maps
    from segdiff_gui.storage import ResultCache
    from tests.factories import bundle_of, make_record

    rng = np.random.default_rng(4)
    base = rng.random((24, 20), dtype=np.float32)
    noisy = [base + rng.normal(0, 0.05, base.shape).astype(np.float32) for _ in range(2)]
    records = [
        make_record("m", base, "cpu b1 r0"),
        make_record("m", noisy[0], "cpu b64 r0"),
        make_record("m", noisy[1], "cpu b64 r1"),
    ]
    bundle = bundle_of(records, tmp_path / "b.h5", ResultCache(tmp_path / "source"))
    window.open_paths([str(bundle)])
    keys = {run.label: run.key for run in window.model.runs}
    window.model.focus_key = keys["cpu b64 r0"]
    window.analysis.explain()
    qtbot.waitUntil(lambda: window.analysis.dialog is not None, timeout=10_000)
    dialog = window.analysis.dialog

    def flips(cutoff: float) -> int:
        return compare_maps(base, noisy[0], cutoff).flips

    assert dialog.attribution.total.effect.flips == flips(0.5) and "cutoff 0.5:" in (
        dialog.title.text()
    )
    window.model.focus_key = keys["cpu b64 r1"]  # a click on another run: the dialog stays
    window.toolbar.cutoff.spin.setValue(0.3)
    qtbot.waitUntil(lambda: dialog.attribution.cutoff == 0.3, timeout=10_000)
    assert flips(0.3) != flips(0.5)
    assert dialog.attribution.total.effect.flips == flips(0.3)
    assert "cutoff 0.3:" in dialog.title.text()
    total_row = [dialog.table.item(r, 0).text() for r in range(dialog.table.rowCount())].index(
        "total"
    )
    assert dialog.table.item(total_row, 7).text() == f"{flips(0.3):,}"
