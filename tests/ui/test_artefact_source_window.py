"""The window puts the user's own artefact beside its Keras source (issue 51): from the
command line (``segdiff-gui ARTEFACT IMAGES --source MODEL``) and from File › Compare with its
Keras source…; both models' runs are planned, computed (by the fake engine) and shown as one
study, the artefact's named with its file name."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QFileDialog

from tests.cli.test_artefact_source import ARTEFACT_RUNS, SOURCE_RUNS, artefact_files
from tests.ui.test_trial_defects import _action


@pytest.fixture
def files(tmp_path):
    return artefact_files(tmp_path)


def test_the_window_puts_the_keras_source_beside_the_artefact(
    window_for, files, tmp_path, qtbot, monkeypatch, fake_engine
):
    cache = tmp_path / "cache"
    # From the command line, as segdiff run takes it.
    given = window_for(files["artefact"], *files["images"], "--source", files["source"],
                       "--repeats", "1", "--cache", cache, "--no-run")  # fmt: skip
    panel = given.run_panel
    rows = [panel.runs.item(i).text() for i in range(panel.runs.count())]
    assert rows == [f"○ {label} — queued" for label in SOURCE_RUNS + ARTEFACT_RUNS]
    # From the File menu, beside an artefact opened alone: its runs join the artefact's.
    window = window_for(files["artefact"], *files["images"], "--config", "batch=1",
                        "--repeats", "1", "--cache", cache, "--no-run")  # fmt: skip
    action = _action(window, "Compare with its &Keras source…")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(files["source"]), ""))
    action.trigger()
    assert window.session.request.source == files["source"]
    qtbot.waitUntil(lambda: window.worker is None and len(window.model.runs) == 2, timeout=60_000)
    labels = sorted(run.label for run in window.model.runs)
    assert labels == ["cpu b1 r0", "model.tflite litert cpu b1 r0"]
    assert window.model.loaded.exact is not None  # the source's exact run, beside them
