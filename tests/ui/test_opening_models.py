"""Opening a model in the window as a new user does: a SavedModel from File › Open,
the recent files and a drop, and a header that describes the model on show. Fast: synthetic
files, and no TensorFlow child is started."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QThread, QUrl, Signal
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QFileDialog, QMenu

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import ModelAnswer
from segdiff_gui.runner.plan import check_model_path, is_model_path
from segdiff_gui.ui.recent import RecentFiles
from tests.factories import menu_action


@pytest.fixture
def saved_model(tmp_path) -> Path:
    """A SavedModel folder as TensorFlow writes one (never loaded here: untrusted, it is
    refused before a byte of it is read)."""
    folder = tmp_path / "exported model"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")
    (folder / "variables" / "variables.index").write_bytes(b"index")
    return folder


@pytest.fixture
def image(tmp_path) -> Path:
    path = tmp_path / "cell.png"
    Image.fromarray(np.zeros((16, 16), np.uint8)).save(path)
    return path


def _opened_saved_model(window, folder: Path) -> None:
    """The window looks at ``folder`` as a SavedModel: planned (refused untrusted, with the
    fix that trusts it), not "unknown model format"."""
    assert window.session is not None
    assert window.session.request.model == folder
    problem = window.run_panel.problem.text()
    assert "is a TensorFlow SavedModel" in problem and "unknown model format" not in problem
    assert window.run_panel.fix_button.text() == "Trust this model and run again"


def test_saved_model_pb_stands_for_its_folder_and_a_plain_folder_is_no_model(
    saved_model, tmp_path, monkeypatch
):
    assert check_model_path(saved_model / "saved_model.pb") == saved_model
    monkeypatch.chdir(saved_model)  # as a relative name: still its folder, named
    assert check_model_path("saved_model.pb") == saved_model
    assert is_model_path(saved_model) and is_model_path(saved_model / "saved_model.pb")
    assert not is_model_path(tmp_path)  # a folder of images
    (tmp_path / "graph.pb").write_bytes(b"\x08\x01")
    with pytest.raises(InputError, match="unknown model format"):
        check_model_path(tmp_path / "graph.pb")


def test_file_open_offers_saved_model_pb_and_opens_its_folder(
    window, saved_model, image, monkeypatch
):
    offered = []

    def choose_model(parent, caption, folder, filters):
        offered.append(filters)
        return str(saved_model / "saved_model.pb"), ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", choose_model)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(image)], ""))
    menu_action(window, "&Open model and images…").trigger()
    (filters,) = offered
    assert filters.startswith("Models (*.keras *.h5 *.hdf5 *.tflite *.onnx *.xml saved_model.pb)")
    _opened_saved_model(window, saved_model)


def test_file_open_saved_model_folder_opens_it_and_says_a_folder_that_is_not_one(
    window, saved_model, image, tmp_path, monkeypatch
):
    chosen = iter([str(tmp_path / "empty"), str(saved_model)])
    (tmp_path / "empty").mkdir()
    asked_images = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: next(chosen))
    monkeypatch.setattr(
        QFileDialog,
        "getOpenFileNames",
        lambda *a, **k: asked_images.append(1) or ([str(image)], ""),
    )
    action = menu_action(window, "Open &SavedModel folder and images…")
    action.trigger()
    # Not a SavedModel: said at once, before the images are asked for.
    assert "folder is not a SavedModel (no saved_model.pb)" in window.run_panel.problem.text()
    assert not asked_images and window.session is None
    action.trigger()
    assert asked_images == [1]
    _opened_saved_model(window, saved_model)


def test_a_saved_model_is_remembered_and_reopened_as_its_folder(
    window, saved_model, image, tmp_path
):
    from PySide6.QtCore import QSettings

    QSettings("segdiff", "segdiff-gui").remove("recent-paths")  # other tests opened files
    window.open_paths([str(saved_model / "saved_model.pb"), str(image)])
    recent = window.sessions.recent
    assert recent.entries()[0] == [str(saved_model), str(image)]
    assert recent.menu.actions()[0].text() == "exported model + cell.png"
    window.open_paths([str(image), str(image)])  # something else, said as a problem
    assert "Cannot open that" in window.run_panel.problem.text()
    recent.menu.actions()[0].trigger()
    _opened_saved_model(window, saved_model)


def test_a_drop_of_images_and_a_saved_model_folder_opens_the_model_on_the_images(
    window, saved_model, image, qtbot
):
    data = QMimeData()
    # Dropped in the order they were selected: the folder after an image.
    data.setUrls([QUrl.fromLocalFile(str(image)), QUrl.fromLocalFile(str(saved_model))])
    event = QDropEvent(
        QPointF(200, 200), Qt.DropAction.CopyAction, data, Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )  # fmt: skip
    window.dropEvent(event)
    _opened_saved_model(window, saved_model)
    assert [Path(path) for path in window.session.request.images] == [image]


class _Computing(QThread):
    """A matrix worker whose child is loading the model until it is cancelled (no child is
    started here); cancelled, it still says what the model was, as a child that had just
    loaded it would: the message is queued for the window as it moves on."""

    message = Signal(object)
    failed = Signal(object)

    def __init__(self, start) -> None:
        super().__init__()
        self._cancelled = threading.Event()

    def run(self) -> None:
        self._cancelled.wait(30)
        self.message.emit(_answer("softmax"))

    def cancel(self) -> None:
        self._cancelled.set()


def _answer(kind: str) -> ModelAnswer:
    return ModelAnswer(
        format="keras", input_shape=[None, 256, 256, 3],
        outputs=[{"name": "seg", "shape": [None, 256, 256, 3]}], kinds=[kind],
    )  # fmt: skip


def test_opening_another_model_forgets_the_last_ones_description(
    window, image, tmp_path, monkeypatch, qtbot
):
    from segdiff_gui.resources import demo_model
    from segdiff_gui.ui import session_controller

    monkeypatch.setattr(session_controller, "MatrixWorker", _Computing)
    window.open_paths([str(demo_model()), str(image)])
    assert window.worker is not None  # its runs are computing
    first = window.worker
    first.message.emit(_answer("softmax"))  # its child loaded the model and said what it is
    info = window.run_panel.model_info
    qtbot.waitUntil(lambda: "softmax" in info.text())
    other = tmp_path / "other.keras"
    other.write_bytes(demo_model().read_bytes())
    window.open_paths([str(other), str(image)])
    qtbot.wait(100)  # what the first runs' worker said as it was cancelled has arrived
    assert window.session.request.model == other
    assert window.worker is not None and window.worker is not first  # its runs started
    # Until they say what it is, the header does not describe the model before it.
    assert info.text() == "the model's input and outputs: said once its runs load it…"
    window.open_paths([str(demo_model()), str(image)])  # back to the first: asked again
    qtbot.wait(100)
    assert info.text() == "the model's input and outputs: said once its runs load it…"


def test_a_model_refused_at_once_is_named_over_its_images_not_the_last_model(
    window, saved_model, image, tmp_path, monkeypatch
):
    from segdiff_gui.resources import demo_model
    from segdiff_gui.ui import session_controller

    monkeypatch.setattr(session_controller, "MatrixWorker", _Computing)
    others = [tmp_path / f"other_{i}.png" for i in range(2)]
    for path in others:
        Image.fromarray(np.full((16, 16), 9, np.uint8)).save(path)
    window.open_paths([str(demo_model()), *map(str, others)])
    panel = window.run_panel
    assert panel.source.text().startswith("unet_sigmoid.keras on other_0.png (2 images)")
    window.open_paths([str(saved_model), str(image)])  # refused untrusted, before planning
    assert "is a TensorFlow SavedModel" in panel.problem.text()
    assert panel.source.text().startswith("exported model on cell.png (1 image); cache ")
    assert [panel.images.item(i).text() for i in range(panel.images.count())] == ["◎ cell.png"]
    assert panel.model_info.text() == "model refused (see below)"


def test_recent_files_keep_spaces_and_relative_paths_and_show_a_short_name(
    qtbot, tmp_path, monkeypatch
):
    """A path with a space was split ("Cannot open that: my: no such model file"), and the
    demo's entry was one line of 17 paths: each entry is its paths whole, shown short."""
    from PySide6.QtCore import QSettings

    QSettings("segdiff", "segdiff-gui").remove("recent-paths")  # other tests opened files
    monkeypatch.chdir(tmp_path)
    opened: list[list[str]] = []
    menu = QMenu()
    recent = RecentFiles(menu, opened.append)
    recent.remember([Path("my model.keras"), Path("my images/cell 1.png")])
    recent.remember([Path("demo.keras"), *(Path(f"cell_{i:02}.png") for i in range(16))])
    texts = [action.text() for action in menu.actions()]
    assert texts == ["demo.keras + 16 images", "my model.keras + cell 1.png"]
    menu.actions()[1].trigger()
    assert opened == [[str(tmp_path / "my model.keras"), str(tmp_path / "my images/cell 1.png")]]
    assert RecentFiles(QMenu(), opened.append).entries()[0][0] == str(tmp_path / "demo.keras")
