"""Opening the user's own artefact in the window: File › Open offers ``.tflite``,
``.onnx`` and an IR's ``.xml`` among the models, and a drop of an artefact with images plans
it under its own runtime. Fast: tiny real artefacts, no child started."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QFileDialog

from segdiff_gui.runner.plan import is_model_path
from tests.factories import menu_action
from tests.hostile.artefact_files import ir_files, onnx_bytes


@pytest.fixture
def image(tmp_path) -> Path:
    path = tmp_path / "cell.png"
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(path)
    return path


def test_file_open_offers_the_artefacts_and_opens_an_ir(window, image, tmp_path, monkeypatch):
    model = ir_files(tmp_path)
    offered = []

    def choose_model(parent, caption, folder, filters):
        offered.append(filters)
        return str(model), ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", choose_model)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(image)], ""))
    menu_action(window, "&Open model and images…").trigger()
    (filters,) = offered
    assert filters.startswith("Models (*.keras *.h5 *.hdf5 *.tflite *.onnx *.xml saved_model.pb)")
    assert "LiteRT flatbuffer (*.tflite)" in filters and "OpenVINO IR (*.xml)" in filters
    assert window.session is not None and window.session.request.model == model
    assert "unknown model format" not in window.run_panel.problem.text()


def test_a_drop_of_an_image_and_an_onnx_model_plans_it_under_onnx_runtime(window, image, tmp_path):
    model = tmp_path / "mine.onnx"
    model.write_bytes(onnx_bytes())
    assert is_model_path(model) and not is_model_path(image)
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(image)), QUrl.fromLocalFile(str(model))])
    event = QDropEvent(
        QPointF(200, 200), Qt.DropAction.CopyAction, data, Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )  # fmt: skip
    window.dropEvent(event)
    assert window.session is not None and window.session.request.model == model
    assert [Path(path) for path in window.session.request.images] == [image]
    plan = window.session.request.plan()
    assert {run.config.runtime for run in plan.runs} == {"onnxruntime"}
    assert sorted(run.config.batch for run in plan.runs if run.repeat == 0) == [1, 64]
