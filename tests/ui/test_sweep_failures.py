"""One failure of a test-set sweep is one line, the same whichever front end asks for the
sweep (the sweep was assembled three times, and its masks were checked before any
run on the command line and in the API but only after every run in the window, in other
words). The runs are the fake engine's (tests/fake_engine.py)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from segdiff_gui import api
from segdiff_gui.core.config import RunConfig
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff


def _masks(tmp_path, small_images, failure):
    """A folder of masks that fails: none named as an image, or one of the wrong size."""
    folder = tmp_path / "masks"
    folder.mkdir()
    if failure == "no mask matches":
        Image.fromarray(np.zeros((32, 32), np.uint8)).save(folder / "elsewhere.png")
        return folder, f"{folder}: holds no mask whose name matches an image of the sweep"
    mask = folder / small_images[1].name
    Image.fromarray(np.zeros((10, 12), np.uint8)).save(mask)
    return folder, f"{mask}: is 10×12 but its image {small_images[1].name} is 32×32"


@pytest.mark.parametrize("failure", ["no mask matches", "a mask of another size"])
def test_a_sweep_s_failure_is_the_same_line_from_the_cli_the_api_and_the_window(
    failure, fake_engine, demo, small_images, tmp_path, qtbot
):
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.plain_text import as_html
    from segdiff_gui.ui.session import MatrixSession

    masks, line = _masks(tmp_path, small_images, failure)
    model = demo[0]

    cli = segdiff("run", model, *small_images, "--config", "batch=1", "--repeats", "1",
                  "--masks", masks, "--cache", tmp_path / "cli", fake=True)  # fmt: skip
    assert cli.returncode == 2 and cli.stderr.splitlines() == [f"segdiff: {line}"]

    study = api.run(model, small_images, "batch=1", repeats=1, cache=tmp_path / "api",
                    progress=False)  # fmt: skip
    with pytest.raises(api.InputError) as raised:
        study.sweep(masks=masks)
    assert str(raised.value) == line

    cache = ResultCache(tmp_path / "window")
    request = MatrixRequest(model, tuple(small_images), cache, (RunConfig(),), repeats=1)
    window = MainWindow(InspectionModel(), cache)
    qtbot.addWidget(window)
    window.set_session(MatrixSession(request, truth=masks))
    window.analysis.sweep()
    panel = window.analysis.sweep_panel
    qtbot.waitUntil(lambda: window.sessions.worker is None, timeout=60_000)
    assert panel.status.text() == as_html(f"The sweep could not be run: {line}")
    assert window.run_panel.problem.text() == line  # where the runs are, too
    assert cache.records() == []  # refused before any run, as on the command line
    window.close()
