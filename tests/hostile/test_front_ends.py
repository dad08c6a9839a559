"""How each front end says that a stored file is hostile or damaged, tested once per front end
with a representative case of the corpus (every case is read in-process against storage in
``test_crafted_bundles.py`` and ``test_damaged_caches.py``): the command line exits 2 with one
line naming the file on stderr and goes on with the other runs, the window does the same from
its process (exit code, stderr, the runs it still paints), and the API names the entry in its
``damaged`` and raises only where nothing can be read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from segdiff_gui import api
from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.inspection import InspectionModel
from tests.conftest import TESTS
from tests.factories import IMAGE_HASH
from tests.hostile.corpus import (
    BUNDLE_CASES,
    CACHE_CASES,
    WHOLE_BUNDLE_CASES,
    Case,
    base_bundle,
    base_cache,
    flip_a_byte_of,
)

BUNDLE_CASE = next(case for case in BUNDLE_CASES if case.name == "external link")
WHOLE_CASE = next(case for case in WHOLE_BUNDLE_CASES if case.name == "not a bundle")
CACHE_CASE = next(case for case in CACHE_CASES if case.name == "a flipped byte in a map")


def _crafted(case: Case, folder: Path) -> Path:
    bundle, outside = folder / "crafted.h5", folder / "outside"
    outside.mkdir(parents=True)
    base_bundle(bundle, folder)
    case.craft(bundle, outside)
    return bundle


def _said(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, list[str]]:
    """``segdiff ARGS`` in this process: its exit code, stdout and the lines of its stderr."""
    code = segdiff([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def _one_line_naming(lines: list[str], path: Path, problem: str, prefix: str = "segdiff") -> None:
    named = [line for line in lines if str(path) in line]
    assert len(named) == 1, lines
    assert named[0].startswith(f"{prefix}: {path}: "), named[0]
    assert re.search(problem, named[0]), named[0]


def window(*args: object, home: Path) -> subprocess.CompletedProcess[str]:
    """``segdiff-gui ARGS`` in a process of its own (offscreen), its engine children the
    fake engine's."""
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "XDG_CONFIG_HOME": str(home / "config"),
        "SEGDIFF_CACHE": str(home / "default-cache"),
    }
    result = subprocess.run(
        [sys.executable, str(TESTS / "fake_engine.py"), "gui", *map(str, args)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result


# the command line -----------------------------------------------------------------------------
def test_the_command_line_says_a_crafted_run_in_one_line_and_shows_the_others(tmp_path, capsys):
    bundle = _crafted(BUNDLE_CASE, tmp_path)
    code, _, lines = _said(capsys, "merge", bundle, "--cache", tmp_path / "laptop")
    assert code == 2
    _one_line_naming(lines, bundle, BUNDLE_CASE.problem + ".*; nothing was merged$")
    assert not ResultCache(tmp_path / "laptop").keys()
    code, out, lines = _said(capsys, "compare", "--bundle", bundle)
    assert code == 2 and "cpu b1 r1" in out  # the good runs are still compared
    _one_line_naming(lines, bundle, BUNDLE_CASE.problem)
    code, out, lines = _said(capsys, "check", "--bundle", bundle)
    assert code == 2 and "FAIL unreadable" in out  # a gate never passes by not seeing a run
    _one_line_naming(lines, bundle, BUNDLE_CASE.problem)


def test_the_command_line_says_a_bundle_broken_as_a_whole_in_one_line(tmp_path, capsys):
    bundle = _crafted(WHOLE_CASE, tmp_path)
    for command in (
        ("merge", bundle),
        ("compare", "--bundle", bundle),
        ("check", "--bundle", bundle),
    ):
        code, _, lines = _said(capsys, *command, "--cache", tmp_path / "laptop")
        assert code == 2 and len(lines) == 1, (command, lines)
        _one_line_naming(lines, bundle, WHOLE_CASE.problem)


def test_the_command_line_says_a_damaged_entry_in_one_line_and_a_bundle_mends_it(tmp_path, capsys):
    cache, keys = base_cache(tmp_path / "cache")
    cache.claim()
    damaged = cache.run_path(keys[2])
    CACHE_CASE.craft(damaged, tmp_path)
    at = ("--cache", cache.root)
    code, out, lines = _said(capsys, "ls", *at)
    assert code == 2 and out.count("cpu b1 r") == 2  # the others are listed
    _one_line_naming(lines, damaged, CACHE_CASE.problem)
    code, out, lines = _said(capsys, "compare", *at)
    assert code == 2 and "cpu b1 r1" in out
    _one_line_naming(lines, damaged, CACHE_CASE.problem)
    code, out, lines = _said(capsys, "check", *at)
    assert code == 2 and "FAIL unreadable" in out
    _one_line_naming(lines, damaged, CACHE_CASE.problem)
    code, out, lines = _said(capsys, "bundle", tmp_path / "out.h5", *at)
    assert code == 2 and "wrote 2 runs" in out
    _one_line_naming(lines, damaged, CACHE_CASE.problem)
    source, _ = base_cache(tmp_path / "elsewhere")
    good = tmp_path / "good.h5"
    assert _said(capsys, "bundle", good, "--cache", source.root)[0] == 0
    code, out, lines = _said(capsys, "merge", good, *at)
    assert code == 0 and "1 replacing damaged copies" in out, lines
    assert _said(capsys, "ls", *at)[0] == 0


# the window -----------------------------------------------------------------------------------
def test_the_window_says_a_crafted_run_in_one_line_and_paints_the_others(tmp_path):
    bundle = _crafted(BUNDLE_CASE, tmp_path)
    shown = window("--open", bundle, "--quit-when-painted", home=tmp_path)
    assert shown.returncode == 2, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if "propagateSizeHints" not in line]
    _one_line_naming(lines, bundle, BUNDLE_CASE.problem, prefix="segdiff-gui")
    assert "painted 2 runs" in shown.stdout, shown.stdout


def test_a_cache_of_the_demo_with_a_damaged_run_still_opens_in_the_window(
    fake_demo_cache, tmp_path
):
    copy = tmp_path / "cache"
    shutil.copytree(fake_demo_cache.root, copy)
    damaged = sorted((copy / "runs").glob("*/*.h5"))[3]
    flip_a_byte_of("map")(damaged, tmp_path)
    shown = window("--cache", copy, "--no-run", "--quit-when-painted", home=tmp_path)
    assert shown.returncode == 2, shown.stderr
    assert str(damaged) in shown.stderr and "to be computed again" in shown.stderr
    assert "painted 9 runs" in shown.stdout


# the API --------------------------------------------------------------------------------------
def test_the_api_names_a_crafted_run_and_studies_the_others(tmp_path):
    bundle = _crafted(BUNDLE_CASE, tmp_path)
    runs = api.open_bundle(bundle)
    (line,) = runs.damaged
    assert line.startswith(f"{bundle}: ") and re.search(BUNDLE_CASE.problem, line), line
    assert f"unreadable: {line}" in repr(runs)
    assert "cpu b1 r1" in [run.label for run in runs.study().runs]
    whole = _crafted(WHOLE_CASE, tmp_path / "whole")
    with pytest.raises(api.InputError) as refused:
        api.open_bundle(whole)
    assert str(refused.value).startswith(f"{whole}: ") and "\n" not in str(refused.value)


# every front end, once: a damaged stored image ------------------------------------------------
def test_a_damaged_stored_image_is_said_in_one_line_and_the_maps_still_show(tmp_path, capsys):
    """A stored target image that cannot be read was left out of the
    report and the window without a word. The maps still show; each front end says, in one
    line naming the file, that the picture under them could not be read."""
    cache, _keys = base_cache(tmp_path / "cache")
    cache.claim()
    image = cache.image_path(IMAGE_HASH)
    image.write_bytes(image.read_bytes()[:600])  # truncated: no longer an HDF5 file
    said = rf"{image}: .*; the maps are shown without the image under them"

    html = tmp_path / "report.html"
    code, _, lines = _said(capsys, "report", "--html", html, "--cache", cache.root)
    assert code == 2
    (line,) = lines
    assert re.fullmatch(f"segdiff: {said}", line), line
    assert "black: the input image could not be read; red: pixels that flip" in html.read_text()

    study = api.open_cache(cache.root).study()
    notebook_report = tmp_path / "notebook.html"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.report(html=notebook_report)
        assert study.map("cpu b4 r0").shape == (32, 32)
        study._repr_html_()  # shown in the notebook: said once, not again
    assert [re.fullmatch(said, str(w.message)) is not None for w in caught] == [True]
    assert "black: the input image could not be read" in notebook_report.read_text()

    model = InspectionModel()
    model.set_runs(cache, cache.records())
    assert len(model.runs) == 3 and model.image is None
    assert [re.fullmatch(said, str(e)) is not None for e in model.unreadable] == [True]


# the command line's arguments -----------------------------------------------------------------
@pytest.mark.parametrize(
    "arguments, problem",
    [
        (("--mean", "nan"), "mean and std must be finite numbers"),
        (("--std", "inf"), "mean and std must be finite numbers"),
        (("--std", "0"), "std must not contain 0"),
        (("--repeats", "100000"), "repeats: must be between 1 and 1,000"),
        (("--config", "batch=1000000000"), "batch must be between 1 and 4,096"),
    ],
)
def test_arguments_past_reason_are_one_line_before_anything_runs(
    demo, tmp_path, capsys, fake_engine, arguments, problem
):
    model, images = demo
    args = ("run", model, *images[:2], "--config", "batch=1", *arguments)
    code, _, lines = _said(capsys, *args, "--cache", tmp_path / "cache")
    assert code == 2 and len(lines) == 1 and problem in lines[0], lines
    assert not ResultCache(tmp_path / "cache").keys()
