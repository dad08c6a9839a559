"""What a killed writer leaves: ``kill -9`` during ``segdiff bundle`` left
its hidden temporary (138 MB in the review) beside the output, and the next bundle to the same
path left it there too. The next write to a path removes the temporaries of segdiff's own
naming for that path whose writer is gone, and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.bundle import BundleReader
from tests.conftest import TESTS
from tests.hostile.corpus import base_cache

pytestmark = pytest.mark.timeout(120, method="thread")

# A child that writes a bundle as `segdiff bundle` does, and says when its temporary holds a
# run: then it is killed, as kill -9 would.
_KILLED_WRITER = """
import sys, time
sys.path.insert(0, {root!r})
from segdiff_gui.storage import bundle
real = bundle.write_record
def write_then_wait(*args):
    real(*args)
    print("writing", flush=True)
    time.sleep(600)
bundle.write_record = write_then_wait
from segdiff_gui.cli.main import main
main(["bundle", {out!r}, "--cache", {cache!r}])
"""


def test_the_next_bundle_to_a_path_removes_what_a_killed_one_left_there(tmp_path, capsys):
    cache, keys = base_cache(tmp_path / "cache")
    out = tmp_path / "results.h5"
    script = _KILLED_WRITER.format(root=str(TESTS.parent), out=str(out), cache=str(cache.root))
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    (left,) = [path for path in tmp_path.iterdir() if path.name.startswith(".results.h5.")]
    assert left.name.startswith(f".results.h5.{writer.pid}.") and left.name.endswith(".tmp")

    # What is not a temporary of this path's killed writer stays: the user's, another
    # output's, and a live writer's (this process's).
    kept = [
        tmp_path / ".results.h5.notes.tmp",
        tmp_path / f".other.h5.{writer.pid}.0123abcd.tmp",
        tmp_path / f".results.h5.{os.getpid()}.0123abcd.tmp",
        tmp_path / "results.h5.bak",
    ]
    for path in kept:
        path.write_bytes(b"the user's")
    assert segdiff(["bundle", str(out), "--cache", str(cache.root)]) == 0, capsys.readouterr()
    assert not left.exists()
    assert all(path.read_bytes() == b"the user's" for path in kept)
    assert sorted(BundleReader(out).keys()) == sorted(keys)


# A child that merges a bundle as `segdiff merge` does, and says when the second run's
# temporary is half written: then it is killed, as kill -9 would.
_KILLED_MERGE = """
import sys, time
sys.path.insert(0, {root!r})
from segdiff_gui.storage import cache
real, runs = cache.write_file_aside, []
def half_then_wait(final, data):
    if final.parent.parent.name == "runs":
        runs.append(final)
    if len(runs) == 2 and runs[-1] == final:
        final.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache._temporary_for(final)
        temporary.write_bytes(data[: len(data) // 2])
        print("writing", flush=True)
        time.sleep(600)
    real(final, data)
cache.write_file_aside = half_then_wait
from segdiff_gui.cli.main import main
main(["merge", {bundle!r}, "--cache", {cache!r}])
"""


def test_a_merge_killed_mid_run_leaves_whole_runs_and_the_next_merge_completes(tmp_path, capsys):
    """``kill -9`` during ``segdiff merge``: the runs it had written read whole, the run in
    flight is absent (never half there), and merging the bundle again adds what is missing and
    removes what the killed merge left of that run."""
    source, keys = base_cache(tmp_path / "elsewhere")
    bundle = tmp_path / "runs.h5"
    assert segdiff(["bundle", str(bundle), "--cache", str(source.root)]) == 0
    cache = tmp_path / "cache"
    script = _KILLED_MERGE.format(root=str(TESTS.parent), bundle=str(bundle), cache=str(cache))
    merger = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert merger.stdout is not None and merger.stdout.readline() == "writing\n"
    merger.send_signal(signal.SIGKILL)
    merger.wait()
    left = [path for path in (cache / "runs").rglob(f".*.{merger.pid}.*.tmp")]
    assert len(left) == 1, sorted(cache.rglob("*"))
    in_flight = left[0].name.split(".h5.")[0].lstrip(".")

    stored = ResultCache(cache)
    assert in_flight in keys and not stored.has(in_flight)
    whole = stored.keys()
    assert len(whole) == 1 and all(stored.damage(key) is None for key in whole)
    capsys.readouterr()
    assert segdiff(["ls", "--cache", str(cache)]) == 0
    assert segdiff(["compare", "--cache", str(cache)]) == 0, capsys.readouterr()

    assert segdiff(["merge", str(bundle), "--cache", str(cache)]) == 0
    assert "2 added, 1 already present" in capsys.readouterr().out
    again = ResultCache(cache)
    assert sorted(again.keys()) == sorted(keys)
    for key in keys:
        assert again.read_run(key).probabilities is not None
    assert not left[0].exists()
