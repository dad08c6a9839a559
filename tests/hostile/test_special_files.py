"""A FIFO or a device where a user's image or model belongs is one line naming it, never a wait
(held cases of the review, kept here). Opening a FIFO for reading waits for a writer
for ever and reading a device never ends; each is seen for what it is, said to be one, and
nothing is computed or stored. (A FIFO among the masks is ``test_user_files``'s; inside a
SavedModel folder, ``test_model_files``'s; as a map, a cache's run or marker, the corpus's.)

Each case is bounded in time: a wait fails its case instead of holding the run ("thread": a
read blocked in C never returns to Python to see a signal)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui import api
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here

pytestmark = pytest.mark.timeout(60, method="thread")

SPECIAL = r"is not a plain file( \(a FIFO, socket or device\))?$"


def _special(path: Path, kind: str) -> Path:
    if kind == "a FIFO":
        os.mkfifo(path)
    else:  # a device behind a name of the right kind
        path.symlink_to("/dev/zero")
    return path


def _one_line(result, path: Path) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"segdiff: {path}: ") and re.search(SPECIAL, line), line


@pytest.mark.parametrize("kind", ["a FIFO", "a device"])
@pytest.mark.parametrize("suffix", [".png", ".tif", ".npy"])
def test_a_special_file_as_an_image_is_one_line(kind, suffix, demo, tmp_path, capsys, fake_engine):
    model, images = demo
    image = _special(tmp_path / f"cell{suffix}", kind)
    cache = tmp_path / "cache"
    common = ("--cache", cache, "--repeats", "1", "--config", "batch=1")
    _one_line(segdiff_here(capsys, "run", model, images[0], image, *common), image)
    np.save(tmp_path / "map.npy", np.full((256, 256), 0.5, np.float32))
    imported = segdiff_here(capsys, "import", tmp_path / "map.npy", "--model", model,
                            "--image", image, "--cache", cache)  # fmt: skip
    _one_line(imported, image)
    assert not ResultCache(cache).keys()


@pytest.mark.parametrize("kind", ["a FIFO", "a device"])
@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_a_special_file_as_a_model_is_one_line_saying_what_it_is(
    kind, suffix, demo, tmp_path, capsys, fake_engine
):
    """It was said to be missing ("no such model file or folder"), which it is not."""
    _, images = demo
    model = _special(tmp_path / f"model{suffix}", kind)
    cache = tmp_path / "cache"
    ran = segdiff_here(capsys, "run", model, images[0], "--cache", cache, "--repeats", "1")
    _one_line(ran, model)
    np.save(tmp_path / "map.npy", np.full((256, 256), 0.5, np.float32))
    imported = segdiff_here(capsys, "import", tmp_path / "map.npy", "--model", model,
                            "--image", images[0], "--cache", cache)  # fmt: skip
    _one_line(imported, model)
    with pytest.raises(api.InputError, match=SPECIAL):
        api.run(model, images[:1], cache=cache, repeats=1, progress=False)
    assert not ResultCache(cache).keys()


def test_a_missing_model_is_still_said_to_be_missing(demo, tmp_path, capsys, fake_engine):
    _, images = demo
    missing = tmp_path / "gone.keras"
    ran = segdiff_here(capsys, "run", missing, images[0], "--cache", tmp_path / "cache")
    assert ran.returncode == 2
    assert ran.stderr.strip() == f"segdiff: {missing}: no such model file or folder"
    dangling = tmp_path / "dangling.h5"
    dangling.symlink_to(tmp_path / "nowhere.h5")
    ran = segdiff_here(capsys, "run", dangling, images[0], "--cache", tmp_path / "cache")
    assert ran.stderr.strip() == f"segdiff: {dangling}: no such model file or folder"
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
