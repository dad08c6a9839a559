"""kill -9 at any moment loses at most the runs in flight: every finished run stays readable.

A killed CLI takes its real engine child with it (the child's own doing: PR_SET_PDEATHSIG);
a killed child costs the runner its run in flight, which the fake engine shows in seconds."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from segdiff_gui.storage import ResultCache
from tests.conftest import TESTS, engine_children

SPECS = [f"batch={b}" for b in range(1, 13)]


def start_cli(model, images, cache_root, env=None, fake=False):
    start = [str(TESTS / "fake_engine.py"), "cli"] if fake else ["-m", "segdiff_gui.cli"]
    args = [
        sys.executable,
        *start,
        "run",
        str(model),
        *map(str, images),
        "--cache",
        str(cache_root),
        "--repeats",
        "2",
        "--json",
    ]
    for spec in SPECS:
        args += ["--config", spec]
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )


def wait_for_runs(cache, count, timeout=180):
    deadline = time.monotonic() + timeout
    while len(cache.keys()) < count:
        assert time.monotonic() < deadline, "no runs finished in time"
        time.sleep(0.05)


def engine_children_of(process):
    return engine_children(process.pid)


@pytest.mark.slow
def test_kill_9_of_the_cli_keeps_every_finished_run(models, small_images, tmp_path):
    cache = ResultCache(tmp_path / "cache")
    cli = start_cli(models / "tiny.keras", small_images, cache.root)
    wait_for_runs(cache, 3)
    children = engine_children_of(cli)
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait(10)
    # The engine child dies with its parent (PR_SET_PDEATHSIG): no orphan keeps computing.
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
    keys = cache.keys()
    assert 3 <= len(keys) < 24
    for key in keys:
        record = cache.read_run(key)
        assert record.probabilities.shape == (32, 32) and record.key == key


def test_kill_9_of_the_child_fails_its_run_and_the_rest_complete(demo, small_images, tmp_path):
    cache = ResultCache(tmp_path / "cache")
    # The run "cpu b5 r0" hangs, so the child is certainly mid-run when it is killed.
    hang = {"FAKE_ENGINE_HANG_ON": "cpu b5 r0"}
    cli = start_cli(demo[0], small_images, cache.root, env=hang, fake=True)
    wait_for_runs(cache, 8)  # b1..b4 × 2 repeats
    deadline = time.monotonic() + 60
    while not (children := engine_children_of(cli)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(children[0].pid, signal.SIGKILL)
    out, err = cli.communicate(timeout=300)
    assert cli.returncode == 1, err
    import json

    runs = json.loads(out)["runs"]
    failed = [r for r in runs if r["status"] == "failed"]
    assert [r["label"] for r in failed] == ["cpu b5 r0"]
    assert "died from SIGKILL" in failed[0]["error"]
    assert sum(r["status"] == "finished" for r in runs) == 23
    assert len(cache.keys()) == 23
    for key in cache.keys():
        assert cache.read_run(key).probabilities.shape == (32, 32)
