"""Writers of one cache at once (held cases of the review, kept here): two merges of
the same runs and two runs of the same request, started together into one folder that is not
a cache yet. Each claims the folder and writes each run aside and renames it into place, so
every command succeeds, every run reads whole whichever writer's copy won, the folder is a
cache once, and no temporary is left. (Two processes writing runs through the storage API
are ``tests/storage/test_cache.py``'s.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from segdiff_gui.storage import ResultCache, write_bundle
from tests.conftest import TESTS
from tests.hostile.corpus import base_cache
from tests.hostile.expect import files_under

pytestmark = pytest.mark.timeout(180, method="thread")


def _start(*args: object, fake: bool = False) -> subprocess.Popen[str]:
    start = [str(TESTS / "fake_engine.py"), "cli"] if fake else ["-m", "segdiff_gui.cli"]
    return subprocess.Popen(
        [sys.executable, *start, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(TESTS.parent)},
    )


def test_merges_and_runs_into_one_new_cache_at_once_all_succeed_and_every_run_is_whole(
    demo, tmp_path
):
    model, images = demo
    source, keys = base_cache(tmp_path / "elsewhere")
    bundles = [tmp_path / "a.h5", tmp_path / "b.h5"]
    for bundle in bundles:
        write_bundle(source, keys, bundle)
    cache = tmp_path / "shared"
    cache.mkdir()  # empty: each writer claims it
    request = (model, *images[:2], "--config", "batch=1", "--config", "batch=2",
               "--repeats", "1", "--cache", cache, "--json")  # fmt: skip
    writers = [_start("merge", bundle, "--cache", cache) for bundle in bundles]
    writers += [_start("run", *request, fake=True) for _ in range(2)]
    said = [writer.communicate(timeout=150) for writer in writers]
    for writer, (_, err) in zip(writers, said, strict=True):
        assert writer.returncode == 0, (writer.args[2:4], err)
    runs = [json.loads(out)["runs"] for out, _ in said[2:]]
    computed = {run["key"] for run in runs[0]}
    assert computed == {run["key"] for run in runs[1]} and len(computed) == 2

    stored = ResultCache(cache)
    assert stored.is_marked
    assert sorted(stored.keys()) == sorted({*keys, *computed})
    for key in stored.keys():
        assert stored.damage(key) is None
        assert stored.read_run(key).probabilities is not None
    assert not [name for name in files_under(cache) if name.endswith(".tmp")]
