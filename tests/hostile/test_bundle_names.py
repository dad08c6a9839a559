"""A bundle naming 100,000 runs, hard links to one run, took 206 s in
``compare`` and 213 s in ``merge``, each run read and said in a line of its own. The runs a
bundle may name are bounded (refused as a whole, in one line, before any is read); under the
bound, a stored run is read once whatever the number of names it is linked under, and the
damage is said in a few lines, never a line per name."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import MAX_BUNDLE_RUNS
from segdiff_gui.storage import ResultCache, write_bundle
from tests.hostile.corpus import base_bundle, base_cache
from tests.hostile.expect import bounded_memory

pytestmark = pytest.mark.timeout(90, method="thread")


def _linked(folder: Path, names: int) -> Path:
    """The corpus's good bundle of three runs, its first run linked under ``names`` more
    names (HDF5 hard links: a few bytes each)."""
    bundle = folder / "linked.h5"
    keys = base_bundle(bundle, folder)
    with h5py.File(bundle, "r+") as handle:
        runs = handle["runs"]
        first = runs[keys[0]]
        for index in range(names):
            runs[f"{index:064x}"] = first
    return bundle


def _said(capsys, *args: object) -> tuple[int, str, list[str]]:
    code = segdiff([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def test_a_bundle_naming_100000_runs_is_one_line(tmp_path, capsys):
    bundle = _linked(tmp_path, 100_000)
    laptop = tmp_path / "laptop"
    for command in (("merge", bundle, "--cache", laptop), ("compare", "--bundle", bundle)):
        with bounded_memory():
            code, _, lines = _said(capsys, *command)
        assert code == 2 and len(lines) == 1, (command, lines[:3], len(lines))
        assert lines[0] == (
            f"segdiff: {bundle}: names 100,003 runs, over segdiff's bound of "
            f"{MAX_BUNDLE_RUNS:,} runs in one bundle"
        )
    assert not ResultCache(laptop).keys()


def test_a_bundle_past_the_bound_is_never_written(tmp_path):
    cache, keys = base_cache(tmp_path / "cache")
    many = keys * (MAX_BUNDLE_RUNS // 3 + 1)
    with pytest.raises(InputError) as refused:
        write_bundle(cache, many, tmp_path / "big.h5")
    assert str(refused.value) == (
        f"{tmp_path / 'big.h5'}: would hold {len(many):,} runs, over segdiff's "
        f"bound of {MAX_BUNDLE_RUNS:,} runs in one bundle; bundle them in parts"
    )
    assert not list(tmp_path.glob("*big.h5*"))


def test_a_run_linked_under_many_names_is_read_once_and_said_in_a_few_lines(tmp_path, capsys):
    names = 20_000
    assert names + 3 <= MAX_BUNDLE_RUNS
    bundle = _linked(tmp_path, names)
    with bounded_memory():
        code, out, lines = _said(capsys, "compare", "--bundle", bundle)
    assert code == 2
    assert "cpu b1 r1" in out  # the runs themselves are still compared
    assert len(lines) <= 6, lines[:8]
    assert all(line.startswith(f"segdiff: {bundle}: ") for line in lines), lines
    assert "claims to be run" in lines[0]
    assert lines[-1].endswith(f"and {names - 5:,} more unreadable entries"), lines[-1]

    laptop = tmp_path / "laptop"
    with bounded_memory():
        code, _, lines = _said(capsys, "merge", bundle, "--cache", laptop)
    assert code == 2 and len(lines) == 1, lines[:3]
    assert f"(and {names - 1:,} more damaged runs); nothing was merged" in lines[0]
    assert not ResultCache(laptop).keys()
