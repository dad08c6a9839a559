"""A cache that can be read but not written (a read-only mount): the runs it holds are
served, the runs it lacks are said, in one line each, not to be computable into it."""

from __future__ import annotations

import json

from segdiff_gui.resources import demo_images, demo_model
from tests.conftest import copy_labelled, mounted_read_only, read_only, segdiff_here


def test_a_read_only_cache_serves_its_runs_and_says_which_it_cannot_compute(
    fake_demo_cache, tmp_path, monkeypatch, capsys, engine_starts
):
    """``segdiff run`` refused the whole request (exit 2) although one of its two
    runs was cached. Now it reports the cached run and fails only the other, for the cache's
    reason (exit 1, as for any failed run); with nothing cached, the reason is one line
    (exit 2). No child starts either way."""
    cache = copy_labelled(fake_demo_cache, tmp_path / "cache", {"cpu b1 r0"})
    read_only(monkeypatch, cache)
    reason = f"{cache.root}: cannot be written (Read-only file system): the runs it holds"
    args = ["run", demo_model(), *demo_images(), "--cache", cache.root, "--repeats", "1"]

    both = segdiff_here(capsys, *args, "--config", "batch=1", "--config", "threads=1", "--json")
    assert both.returncode == 1, both.stderr
    runs = json.loads(both.stdout)["runs"]
    assert [(run["label"], run["status"]) for run in runs] == [
        ("cpu b1 r0", "cached"),
        ("cpu b1 threads1 r0", "failed"),
    ]
    assert runs[1]["error"].startswith(reason)

    said = segdiff_here(capsys, *args, "--config", "batch=1", "--config", "threads=1")
    assert said.returncode == 1
    assert f"failed cpu b1 threads1 r0: {reason}" in said.stderr.replace("\n", " ")
    assert "1 from the cache, 1 failed" in said.stdout + said.stderr

    lacking = segdiff_here(capsys, *args, "--config", "threads=1")
    assert lacking.returncode == 2
    assert lacking.stderr.startswith(f"segdiff: {reason}") and lacking.stderr.count("\n") == 1
    assert engine_starts == []


def test_a_sweep_on_a_read_only_cache_summarises_what_it_holds(
    fake_demo_cache, tmp_path, capsys, engine_starts
):
    """A sweep on a read-only cache (mounted so) summarises the runs it holds and fails the
    others for the cache's reason; the test set's manifest, which a later sweep there would
    count by, is left unwritten, not a ``Read-only file system`` error ending the sweep."""
    cache = copy_labelled(fake_demo_cache, tmp_path / "cache", {"cpu b1 r0"})
    with mounted_read_only(cache.root):
        swept = segdiff_here(
            capsys, "run", demo_model(), *demo_images(), "--cache", cache.root,
            "--config", "batch=1", "--repeats", "1", "--sweep",
        )  # fmt: skip
    assert swept.returncode == 1, swept.stderr
    assert "Test set:" in swept.stdout and "cpu b1 (reference)" in swept.stdout
    failed = [line for line in swept.stderr.splitlines() if line.startswith("failed ")]
    assert failed and all("cannot be written (Read-only file system)" in f for f in failed)
    assert not any(line.startswith("segdiff:") for line in swept.stderr.splitlines())
    assert engine_starts == []


def test_a_layer_comparison_or_repair_on_a_read_only_cache_is_refused_in_one_line(
    fake_demo_cache, tmp_path, monkeypatch, capsys, engine_starts
):
    """A layer comparison and a repair are nothing without their runs: on a cache that
    cannot store them they are refused before any child starts, in the cache's one line, as
    every request was before a matrix served what such a cache holds."""
    cache = copy_labelled(fake_demo_cache, tmp_path / "cache", {"cpu b1 r0"})
    read_only(monkeypatch, cache)
    reason = f"segdiff: {cache.root}: cannot be written (Read-only file system)"
    inputs = (demo_model(), *demo_images(), "--cache", cache.root)
    for command in (
        ("layers", *inputs, "--from", "batch=1", "--to", "batch=1,threads=1"),
        ("repair", *inputs, "--config", "batch=1,precision=mixed_float16"),
    ):
        refused = segdiff_here(capsys, *command)
        assert refused.returncode == 2, (command[0], refused.stderr)
        assert refused.stderr.startswith(reason) and refused.stderr.count("\n") == 1
    # Both runs cached: the probes and the comparison would still be written (the review).
    both = copy_labelled(fake_demo_cache, tmp_path / "both", {"cpu b1 r0", "cpu b64 r0"})
    read_only(monkeypatch, both)
    cached = segdiff_here(
        capsys, "layers", demo_model(), *demo_images(), "--cache", both.root,
        "--from", "cpu b1", "--to", "cpu b64",
    )  # fmt: skip
    assert cached.returncode == 2, cached.stderr
    assert cached.stderr.startswith(f"segdiff: {both.root}: cannot be written (Read-only file")
    assert cached.stderr.count("\n") == 1
    assert engine_starts == []


def test_a_read_only_cache_holding_every_run_asked_for_says_nothing_of_writing(
    fake_demo_cache, tmp_path, monkeypatch, capsys, engine_starts
):
    """The review: where every run asked for is cached but a target image is not kept beside
    them, the plan said the cache could not be written (the window's problem line: "choose
    another cache folder to compute them") though nothing was to be computed."""
    import shutil

    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.runner.request import MatrixRequest

    cache = copy_labelled(fake_demo_cache, tmp_path / "cache", {"cpu b1 r0"})
    shutil.rmtree(cache.root / "images")
    read_only(monkeypatch, cache)
    request = MatrixRequest(demo_model(), tuple(demo_images()), cache, (RunConfig(),), repeats=1)
    plan = request.plan()
    assert [run.label for run in plan.cached] == ["cpu b1 r0"]
    assert plan.unwritable is None and plan.unstorable == ()
    args = ("run", demo_model(), *demo_images(), "--cache", cache.root, "--repeats", "1")
    served = segdiff_here(capsys, *args, "--config", "batch=1")
    assert served.returncode == 0, served.stderr
    assert "cannot be written" not in served.stdout + served.stderr
    assert engine_starts == []
