"""The window plans by the planner's one rule (tests/runner/
test_skipped_configurations.py): a configuration the model cannot take is a row of the Runs
list marked skipped, why in its tooltip and under the list, while the others are planned
(and run: nothing is offered for the skipped row)."""

import numpy as np
from PIL import Image

from segdiff_gui.core.protocol import PlanReady
from segdiff_gui.ui.run_panel import RunPanel
from tests.factories import saved_model


def _rows(panel: RunPanel) -> list[tuple[str, str]]:
    items = [panel.runs.item(i) for i in range(panel.runs.count())]
    return [(item.text(), item.toolTip()) for item in items]


def test_the_window_lists_a_skipped_configuration_with_why(window_for, tmp_path, fake_engine):
    model = saved_model(tmp_path / "model")
    image = tmp_path / "photo.png"
    Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8)).save(image)
    window = window_for(model, image, "--config", "batch=1", "--config", "precision=float64",
                        "--trust-model", "--repeats", "1", "--cache", tmp_path / "cache",
                        "--no-run")  # fmt: skip
    panel = window.run_panel
    assert not panel.problem.isVisible(), panel.problem.text()
    (queued, skipped) = _rows(panel)
    assert queued[0] == "○ cpu b1 r0 — queued"
    assert skipped[0] == "⊘ cpu b1 fp64 — skipped"
    assert "precision override needs a Keras model" in skipped[1]
    assert panel.status.text().startswith("skipped cpu b1 fp64: ")
    assert panel.run_button.isEnabled()  # the runs it can compute


def test_the_runs_panel_says_what_a_running_matrix_skipped(qtbot):
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.set_planned({"k1": "cpu b1 r0"}, {"k1"})
    skipped = (("cpu b1 emu-tf32", "a SavedModel's graph"),)
    panel.show_message(PlanReady(total=1, cached=1, children=0, skipped=skipped))
    assert _rows(panel)[-1] == ("⊘ cpu b1 emu-tf32 — skipped", "a SavedModel's graph")
    assert panel.status.text() == "skipped cpu b1 emu-tf32: a SavedModel's graph"
    panel.set_running(False)
    assert not panel.run_button.isEnabled()  # nothing is missing that could run
