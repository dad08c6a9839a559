"""Issue 50: a user's own files given to segdiff are untrusted input too. A map to import or
reproduce, an input image and a ground-truth mask are each read from their own bytes only,
within bounds, and a hostile or damaged one is one line naming it (exit 2): nothing read
outside the given file, no wait, nothing stored.

Each case is bounded in time here: a wait on a FIFO fails its case instead of holding the run
("thread": a read blocked in C never returns to Python to see a signal)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from segdiff_gui.resources import demo_dir
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff, segdiff_here

pytestmark = pytest.mark.timeout(120, method="thread")


def _one_line(result, path: Path, problem: str) -> None:
    """The command said one line naming ``path`` and ``problem`` (a regex) and exited 2."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"segdiff: {path}: ") and re.search(problem, line), line


# case 4: a FIFO among the ground-truth masks ----------------------------------------------------
def test_a_fifo_among_the_masks_is_one_line_not_a_wait(demo, tmp_path, capsys, fake_engine):
    """Pillow's open waited for a writer for ever: ``run --sweep --masks`` before any run
    (its masks are checked against the images first) and ``sweep --masks`` over stored runs.
    Each command runs in a process of its own, killed if it waits."""
    model, images = demo
    masks = tmp_path / "masks"
    masks.mkdir()
    shutil.copy(demo_dir() / "masks" / images[1].name, masks)
    fifo = masks / images[0].name
    os.mkfifo(fifo)
    cache = tmp_path / "cache"
    common = (model, *images[:2], "--config", "batch=1", "--repeats", "1", "--cache", cache)

    swept = segdiff("run", *common, "--sweep", "--masks", masks, fake=True, timeout=60)
    _one_line(swept, fifo, r"is not a plain file \(a FIFO, socket or device\)$")
    assert not ResultCache(cache).keys()  # refused before anything ran

    assert segdiff_here(capsys, "run", *common).returncode == 0
    stored_runs = sorted(ResultCache(cache).keys())
    again = segdiff("sweep", "--masks", masks, "--cache", cache, fake=True, timeout=60)
    _one_line(again, fifo, r"is not a plain file \(a FIFO, socket or device\)$")
    assert sorted(ResultCache(cache).keys()) == stored_runs
