"""What a killed writer leaves (issue 50, case 13): ``kill -9`` during ``segdiff bundle`` left
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
