"""A cache on a read-only mount (held cases of the review, kept here): every command
that reads it serves it, and nothing in it changes; a command that would store runs in it
says so in the cache's one line (exit 2) before it stores any, naming the cache, not a
temporary of segdiff's own. (``run``, ``sweep``, ``layers`` and ``repair`` on such a cache are
``tests/cli/test_read_only_cache.py``'s.)"""

from __future__ import annotations

import numpy as np
import pytest

from segdiff_gui.storage import ResultCache, write_bundle
from tests.conftest import mounted_read_only, segdiff_here
from tests.factories import make_record
from tests.hostile.corpus import base_cache
from tests.hostile.expect import files_under

pytestmark = pytest.mark.timeout(120, method="thread")


def test_every_command_that_reads_a_read_only_cache_serves_it(tmp_path, capsys):
    cache, keys = base_cache(tmp_path / "cache")
    same = tmp_path / "same.h5"
    write_bundle(cache, keys, same)
    out = tmp_path / "out"
    out.mkdir()
    before = files_under(cache.root)
    at = ("--cache", cache.root)
    pair = ("--ref", "cpu b1 r0", "--other", "cpu b4 r0")
    with mounted_read_only(cache.root):
        said = {
            "ls": segdiff_here(capsys, "ls", *at),
            "compare": segdiff_here(capsys, "compare", *at, "--json"),
            "check": segdiff_here(capsys, "check", *at),
            "diagnose": segdiff_here(capsys, "diagnose", *at),
            "sweep": segdiff_here(capsys, "sweep", *at),
            "explain": segdiff_here(
                capsys, "explain", *at, "--from", "cpu b1 r0", "--to", "cpu b4 r0"
            ),  # fmt: skip
            "export": segdiff_here(capsys, "export", *at, *pair, "--csv", out / "p.csv"),
            "report": segdiff_here(capsys, "report", *at, "--html", out / "r.html"),
            "bundle": segdiff_here(capsys, "bundle", out / "b.h5", *at),
            # every run already there: nothing to store
            "merge": segdiff_here(capsys, "merge", same, *at),
        }
    for command, result in said.items():
        assert result.returncode in (0, 1), (command, result.stderr)
        assert "cannot be written" not in result.stderr and "Read-only" not in result.stderr
    assert "3 already present" in said["merge"].stdout
    assert files_under(cache.root) == before


def test_a_merge_or_an_import_into_a_read_only_cache_is_the_caches_one_line(
    demo, tmp_path, capsys, fake_engine
):
    """They said a folder or a hidden temporary inside the cache (``cache/runs/3d: Read-only
    file system``, ``cache/images/.cfe6….h5.19211.18322ab3.tmp: …``), not the cache."""
    model, images = demo
    cache, _ = base_cache(tmp_path / "cache")
    elsewhere = ResultCache(tmp_path / "elsewhere")
    new = make_record("another model", np.full((32, 32), 0.5, np.float32))
    elsewhere.write_run(new)
    bundle = tmp_path / "new.h5"
    write_bundle(elsewhere, [new.key], bundle)
    mine = tmp_path / "mine.npy"
    np.save(mine, np.full((256, 256), 0.25, np.float32))
    before = files_under(cache.root)
    at = ("--cache", cache.root)
    with mounted_read_only(cache.root):
        merged = segdiff_here(capsys, "merge", bundle, *at)
        imported = segdiff_here(capsys, "import", mine, "--model", model, "--image", images[0], *at)
    for result in (merged, imported):
        assert result.returncode == 2, (result.stdout, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"segdiff: {cache.root}: cannot be written (Read-only file system)")
    assert files_under(cache.root) == before
