"""The array job ``segdiff slurm-script`` writes, on a real Slurm cluster (single node, started
for this module): three array tasks each run ``segdiff run … --shard slurm --bundle``; the
merge and sweep the script names give the same sweep as one unsharded run, bit for bit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from segdiff_gui.resources import demo_dir, demo_model
from segdiff_gui.storage import ResultCache
from tests.cluster.slurm_cluster import missing, single_node_cluster
from tests.conftest import segdiff

pytestmark = pytest.mark.slow

IMAGES = 4  # of the demo's 16: three shards of 1, 1 and 2 images


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = missing()
    if reason:
        pytest.skip(reason)
    with single_node_cluster(tmp_path_factory.mktemp("slurm")) as started:
        yield started


@pytest.fixture(scope="module")
def test_set(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("set")
    for folder in ("images", "masks"):
        (root / folder).mkdir()
        for image in sorted((demo_dir() / "images").iterdir())[:IMAGES]:
            shutil.copy(demo_dir() / folder / image.name, root / folder)
    return root / "images", root / "masks"


def test_the_array_job_segdiff_writes_merged_is_the_unsharded_sweep_bit_for_bit(
    cluster, test_set, tmp_path
):
    images, masks = test_set
    results, script = tmp_path / "results", tmp_path / "array.sh"
    made = segdiff(
        "slurm-script", "--shards", "3", "--results", results, "--out", script,
        demo_model(), images, "--config", "batch=1", "--repeats", "1", "--masks", masks,
        cwd=tmp_path, env={"SEGDIFF_CACHE": str(tmp_path / "desk")},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert f"submit it with: sbatch {script}" in made.stdout
    started = time.monotonic()
    job = cluster.sbatch(script)  # exactly as written: its #SBATCH lines and all
    cluster.wait(job, deadline_s=600)
    took = time.monotonic() - started
    logs = {path.name: path.read_text() for path in sorted(results.glob("slurm-*.log"))}
    bundles = sorted(results.glob("shard-*.h5"))
    names = ["shard-1-of-3.h5", "shard-2-of-3.h5", "shard-3-of-3.h5"]
    assert [path.name for path in bundles] == names, logs
    # Each task ran its own slice (tasks 1, 2, 3 are shards 1, 2, 3 of 3).
    ran = [" ".join(log.split()) for log in logs.values()]
    assert "1 run of unet_sigmoid.keras on cell_00.png: 1 computed" in ran[0], ran[0]
    assert "1 run of unet_sigmoid.keras on cell_01.png: 1 computed" in ran[1], ran[1]
    assert "2 runs of unet_sigmoid.keras on 2 of 4 images (this shard): 2 computed" in ran[2]
    assert not list(tmp_path.glob("segdiff-*"))  # each task's own cache went with it

    # The merge and sweep the script names, as written, into a cache of the test's.
    (after,) = [line[4:] for line in script.read_text().splitlines() if line.startswith("#   ")][:1]
    merged = tmp_path / "merged"
    done = subprocess.run(
        ["bash", "-c", after], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "SEGDIFF_CACHE": str(merged)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "test set" in done.stdout and "all 3 shards merged (4 images)" in done.stdout
    assert "Test set: 4 images against cpu b1" in " ".join(done.stdout.split())
    swept = json.loads(segdiff("sweep", "--masks", masks, "--cache", merged, "--json").stdout)
    (covered,) = swept.pop("test_sets")
    assert covered["present"] == covered["size"] == 4 and covered["missing_shards"] == []
    whole = segdiff(
        "run", demo_model(), images, "--sweep", "--masks", masks, "--config", "batch=1",
        "--repeats", "1", "--cache", tmp_path / "whole", "--json",
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    unsharded = json.loads(whole.stdout)["sweep"]
    (one,) = unsharded.pop("test_sets")  # one run on one machine: its own set, one shard
    assert (one["set"], one["shards"], one["present"]) == (covered["set"], 1, 4)
    assert swept == unsharded
    ours = {r.key: r for r in ResultCache(merged).records()}
    theirs = {r.key: r for r in ResultCache(tmp_path / "whole").records()}
    assert sorted(ours) == sorted(theirs) and len(ours) == IMAGES
    for key in ours:
        assert (
            ResultCache(merged).read_run(key).probabilities.tobytes()
            == ResultCache(tmp_path / "whole").read_run(key).probabilities.tobytes()
        )
    print(f"\n{cluster.version}: array of 3 tasks finished in {took:.1f} s")
