"""The window puts the user's own artefact beside its Keras source: from the
command line (``segdiff-gui ARTEFACT IMAGES --source MODEL``) and from File › Compare with its
Keras source…; both models' runs are planned, computed (by the fake engine) and shown as one
study, the artefact's named with its file name."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QFileDialog

from tests.factories import ARTEFACT_RUNS, SOURCE_RUNS, artefact_files, menu_action


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
    action = menu_action(window, "Compare with its &Keras source…")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(files["source"]), ""))
    action.trigger()
    assert window.session.request.source == files["source"]
    qtbot.waitUntil(lambda: window.worker is None and len(window.model.runs) == 2, timeout=60_000)
    labels = sorted(run.label for run in window.model.runs)
    assert labels == ["cpu b1 r0", "model.tflite litert cpu b1 r0"]
    assert window.model.loaded.exact is not None  # the source's exact run, beside them


@pytest.mark.slow
def test_the_layer_view_compares_an_int8_artefact_with_its_source(
    window_for, artefacts, demo, qtbot, tmp_path
):
    """Real children: the full-int8 ``.tflite`` beside the demo's ``.keras``, its run probed
    against the source's reference from Analysis › Layers, each layer with its int8 scale."""
    model, images = demo
    window = window_for(artefacts / "int8.tflite", *images[:2], "--source", model,
                        "--repeats", "1", "--cache", tmp_path / "cache", "--no-run")  # fmt: skip
    window.start_runs()
    qtbot.waitUntil(lambda: window.worker is None and len(window.model.runs) == 2, timeout=180_000)
    assert window.model.reference is not None and window.model.reference.label == "cpu b1 r0"
    artefact = next(run for run in window.model.runs if run.artefact)
    assert artefact.label == "int8.tflite litert cpu b1 r0"
    window.model.focus_key = artefact.key
    window._probe_layers()  # Analysis → Layers (Ctrl+L)
    panel = window.analysis.layers_panel
    qtbot.waitUntil(lambda: panel.probe is not None, timeout=180_000)
    assert panel.table.rowCount() == 17 and panel.table.item(0, 1).text() == "enc1_1"
    headers = [panel.table.horizontalHeaderItem(i).text() for i in range(panel.table.columnCount())]
    assert headers[-4:] == ["scale", "zero pt", "max steps", "mean steps"]
    assert all(panel.table.item(row, headers.index("scale")).text() for row in range(17))
    assert "born in enc1_1" in panel.summary.text()
    assert "int8.tflite litert cpu b1 r0" in panel.title.text()
