"""``segdiff run --shard slurm`` in a Slurm array task (and ``k8s/N`` in an indexed Job's
pod) runs the slice the scheduler's variables name: the same images as ``--shard K/N``."""

from __future__ import annotations

import json

from segdiff_gui.resources import demo_dir, demo_model
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here


def _targets(capsys, tmp_path, name: str, shard: str) -> list[str]:
    cache = tmp_path / name
    result = segdiff_here(
        capsys, "run", demo_model(), demo_dir() / "images", "--shard", shard,
        "--config", "batch=1", "--repeats", "1", "--cache", cache, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"]
    return sorted({record.target_name for record in ResultCache(cache).records()})


def test_a_slurm_array_task_and_a_kubernetes_pod_run_the_slice_k_of_n_names(
    capsys, tmp_path, monkeypatch, fake_engine
):
    # sbatch --array=10-16:2 (four tasks); this is its third, 14: shard 3 of 4.
    for name, value in {"ID": 14, "MIN": 10, "MAX": 16, "STEP": 2, "COUNT": 4}.items():
        monkeypatch.setenv(f"SLURM_ARRAY_TASK_{name}", str(value))
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")
    written = _targets(capsys, tmp_path, "written", "3/4")
    assert written == [f"cell_{i:02d}.png" for i in range(8, 12)]  # 16 images, third quarter
    assert _targets(capsys, tmp_path, "slurm", "slurm") == written
    assert _targets(capsys, tmp_path, "k8s", "k8s/4") == written


def test_outside_an_array_the_scheduler_shard_is_one_line_and_nothing_runs(
    capsys, tmp_path, monkeypatch, fake_engine
):
    for name in ("ID", "MIN", "MAX", "STEP", "COUNT"):
        monkeypatch.delenv(f"SLURM_ARRAY_TASK_{name}", raising=False)
    result = segdiff_here(
        capsys, "run", demo_model(), demo_dir() / "images", "--shard", "slurm",
        "--cache", tmp_path / "cache",
    )  # fmt: skip
    assert result.returncode == 2
    (line,) = [line for line in result.stderr.splitlines() if "SLURM_ARRAY_TASK_ID" in line]
    assert "SLURM_ARRAY_TASK_ID is not set; run it in a Slurm array task" in line
    assert not list((tmp_path / "cache").glob("runs/**/*.h5"))


def test_the_help_names_the_schedulers_variables(capsys):
    shown = " ".join(segdiff_here(capsys, "run", "--help").stdout.split())
    assert "K/N|slurm|k8s/N" in shown
    assert "SLURM_ARRAY_TASK_ID" in shown and "JOB_COMPLETION_INDEX" in shown
