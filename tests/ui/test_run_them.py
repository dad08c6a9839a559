"""A diagnosis's "run them" in the window: its configurations join the session's request, the
matrix editor shows them as if typed (a one-knob checkbox, or a line of its own), and they run."""

from __future__ import annotations

from segdiff_gui.core.config import RunConfig


def test_run_them_shows_the_configurations_in_the_matrix_and_runs_them(
    window_for, fake_demo_cache, qtbot, fake_engine
):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    editor = window.run_panel.editor
    before = list(window.session.request.configurations())
    window.analysis.diagnosis.measure_requested.emit(["onednn=off", "batch=64,onednn=off"])
    configs = window.session.request.configs
    assert configs[: len(before)] == tuple(before)
    assert RunConfig(onednn=False) in configs and RunConfig(batch=64, onednn=False) in configs
    # The editor follows the request: a batch-1 run with one knob is its checkbox.
    assert editor.knobs["oneDNN off"].isChecked()
    assert "batch=64,onednn=off" in editor.extra.toPlainText().splitlines()
    assert set(editor.configs()) == set(configs)
    qtbot.waitUntil(lambda: window.worker is None, timeout=60_000)
    shown = {run.config for run in window.model.runs}
    assert {RunConfig(onednn=False), RunConfig(batch=64, onednn=False)} <= shown
    # An edit of the matrix afterwards keeps them: the editor shows what the request holds.
    editor.repeats.setValue(1)
    assert window.session.request.repeats == 1
    assert RunConfig(batch=64, onednn=False) in window.session.request.configs


def test_a_line_being_typed_stays_as_typed_while_the_request_changes_otherwise(
    window_for, fake_demo_cache, qtbot
):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    editor = window.run_panel.editor
    editor.extra.setPlainText("precision=n")  # not a precision yet: said, left out
    qtbot.waitUntil(lambda: editor.extra_problem.isVisible(), timeout=5000)
    window.run_panel.target_chosen.emit(3)  # the request's target changes, not its matrix
    assert window.session.request.target == "cell_03.png"
    assert editor.extra.toPlainText() == "precision=n"
