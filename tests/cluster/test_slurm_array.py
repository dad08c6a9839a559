"""README's array job on a real Slurm cluster (single node, started for this module): three
array tasks, indexed from 0, each run ``segdiff run … --shard slurm`` and bundle their cache;
the bundles merged give the same sweep as one unsharded run, bit for bit."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from segdiff_gui.resources import demo_dir, demo_model
from segdiff_gui.storage import ResultCache
from tests.cluster.slurm_cluster import missing, single_node_cluster
from tests.conftest import segdiff

pytestmark = pytest.mark.slow

SEGDIFF = Path(sys.executable).with_name("segdiff")
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


def test_an_array_job_merged_is_the_unsharded_sweep_bit_for_bit(cluster, test_set, tmp_path):
    images, masks = test_set
    script = tmp_path / "array.sh"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/bash
            set -euo pipefail
            export SEGDIFF_CACHE={tmp_path}/cache-$SLURM_ARRAY_TASK_ID
            {SEGDIFF} run {demo_model()} {images} --shard slurm --config batch=1 --repeats 1
            {SEGDIFF} bundle {tmp_path}/shard-$SLURM_ARRAY_TASK_ID.h5
            """
        )
    )
    started = time.monotonic()
    job = cluster.sbatch("--array=0-2", f"--output={tmp_path}/task-%a.log", script)
    cluster.wait(job, deadline_s=600)
    took = time.monotonic() - started
    logs = {path.name: path.read_text() for path in sorted(tmp_path.glob("task-*.log"))}
    bundles = sorted(tmp_path.glob("shard-*.h5"))
    assert [path.name for path in bundles] == ["shard-0.h5", "shard-1.h5", "shard-2.h5"], logs
    # Each task ran its own slice (--array=0-2: tasks 0, 1, 2 are shards 1, 2, 3 of 3).
    ran = [" ".join(log.split()) for log in logs.values()]
    assert "1 run of unet_sigmoid.keras on cell_00.png: 1 computed" in ran[0], ran[0]
    assert "1 run of unet_sigmoid.keras on cell_01.png: 1 computed" in ran[1], ran[1]
    assert "2 runs of unet_sigmoid.keras on 2 of 4 images (this shard): 2 computed" in ran[2]

    merged = tmp_path / "merged"
    assert segdiff("merge", *bundles, "--cache", merged).returncode == 0
    swept = segdiff("sweep", "--masks", masks, "--cache", merged, "--json")
    assert swept.returncode == 0, swept.stderr
    whole = segdiff(
        "run", demo_model(), images, "--sweep", "--masks", masks, "--config", "batch=1",
        "--repeats", "1", "--cache", tmp_path / "whole", "--json",
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    assert json.loads(swept.stdout) == json.loads(whole.stdout)["sweep"]
    ours = {r.key: r for r in ResultCache(merged).records()}
    theirs = {r.key: r for r in ResultCache(tmp_path / "whole").records()}
    assert sorted(ours) == sorted(theirs) and len(ours) == IMAGES
    for key in ours:
        assert (
            ResultCache(merged).read_run(key).probabilities.tobytes()
            == ResultCache(tmp_path / "whole").read_run(key).probabilities.tobytes()
        )
    print(f"\n{cluster.version}: array of 3 tasks finished in {took:.1f} s")
