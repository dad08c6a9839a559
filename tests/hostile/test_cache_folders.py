"""A project folder claimed as a cache: a folder holding only a user's
``images/`` and ``models/`` was taken for a cache (its names are ones a cache has), and
segdiff's files were written among the user's. A cache folder is one that is empty or already
segdiff's (its marker): anything else is refused in one line naming the folder, by every
front end's way to a cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import segdiff_gui
from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import InputError
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.ui.app import _parser, open_session
from tests.hostile.corpus import base_cache
from tests.hostile.expect import files_under

pytestmark = pytest.mark.timeout(120, method="thread")


@pytest.fixture
def project(tmp_path) -> Path:
    """A user's project folder: their images and their model, nothing of segdiff's."""
    folder = tmp_path / "project"
    (folder / "images").mkdir(parents=True)
    (folder / "models").mkdir()
    shutil.copy(demo_images()[0], folder / "images" / "cell.png")
    shutil.copy(demo_model(), folder / "models" / "unet.keras")
    return folder


def _refused(error: BaseException, folder: Path) -> None:
    assert isinstance(error, InputError), repr(error)
    line = str(error)
    assert "\n" not in line, line
    assert line.startswith(f"{folder}: is not a segdiff cache: it holds other files "), line
    assert "(images, models)" in line


def test_a_project_folder_is_never_taken_for_a_cache(project, tmp_path, capsys, fake_engine):
    before = files_under(project)
    entries = sorted(p.name for p in project.iterdir())
    model, image = project / "models" / "unet.keras", project / "images" / "cell.png"
    mine = tmp_path / "mine.npy"
    np.save(mine, np.full((256, 256), 0.5, np.float32))
    bundle = tmp_path / "b.h5"
    source, _ = base_cache(tmp_path / "source")
    assert segdiff(["bundle", str(bundle), "--cache", str(source.root)]) == 0
    capsys.readouterr()

    # The command line.
    for command in (
        ["run", str(model), str(image), "--repeats", "1"],
        ["import", str(mine), "--model", str(model), "--image", str(image)],
        ["merge", str(bundle)],
        ["devices"],
    ):
        assert segdiff([*command, "--cache", str(project)]) == 2, command
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("segdiff: "), line
        _refused(InputError.from_message(line.removeprefix("segdiff: ")), project)
    # The API, and the window.
    for call in (
        lambda: segdiff_gui.run(
            model, image, "batch=1", repeats=1, cache=project, progress=False
        ),  # fmt: skip
        lambda: segdiff_gui.import_maps(mine, model, image, cache=project),
        lambda: segdiff_gui.devices(cache=project),
        lambda: open_session(_parser().parse_args(["--cache", str(project)])),
    ):
        with pytest.raises(InputError) as refused:
            call()
        _refused(refused.value, project)

    assert files_under(project) == before
    assert sorted(p.name for p in project.iterdir()) == entries  # no marker, no probe/
