"""``segdiff run --shard slurm`` in a Slurm array task (and ``k8s/N`` in an indexed Job's
pod) runs the slice the scheduler's variables name: the same images as ``--shard K/N``."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

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


def _shard(capsys, tmp_path, number: int, *more: object):
    """Shard ``number`` of 3 of the demo's 16 images, in a cache of its own, bundled into
    ``tmp_path/results`` as the array script does."""
    return segdiff_here(
        capsys, "run", demo_model(), demo_dir() / "images", "--shard", f"{number}/3",
        "--config", "batch=1", "--repeats", "1", "--cache", tmp_path / f"task{number}",
        "--bundle", tmp_path / "results", *more,
    )  # fmt: skip


def test_merged_shards_name_the_shard_never_merged_and_the_sweep_never_passes_for_whole(
    capsys, tmp_path, fake_engine
):
    for number in (1, 2, 3):
        result = _shard(capsys, tmp_path, number)
        assert result.returncode == 0, result.stderr
        assert f"of shard {number}/3 to {tmp_path / 'results'}" in result.stdout
    bundles = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert bundles == ["shard-1-of-3.h5", "shard-2-of-3.h5", "shard-3-of-3.h5"]
    merged = tmp_path / "merged"
    first, third = (tmp_path / "results" / bundles[i] for i in (0, 2))
    result = segdiff_here(capsys, "merge", first, third, "--cache", merged)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "Incomplete test set: 11 of 16 images" in said
    assert "shard 2/3 (5 images) missing" in said

    swept = segdiff_here(capsys, "sweep", "--cache", merged)
    assert swept.returncode == 1  # a partial set is never a pass
    shown = " ".join(swept.stdout.split())
    assert "Test set: 11 of 16 images (incomplete)" in shown
    assert "shard 2/3 (5 images) missing" in shown
    data = json.loads(segdiff_here(capsys, "sweep", "--cache", merged, "--json").stdout)
    assert data["expected_images"] == 16 and len(data["images"]) == 11
    (covered,) = data["test_sets"]
    assert covered["missing_shards"] == [2] and covered["absent"] == []
    # A notebook's sweep of the merged cache says the same.
    from segdiff_gui import api

    noted = api.open_cache(merged).study(image="cell_00.png").sweep()
    assert "11 of 16 images (incomplete)" in repr(noted) and len(noted.incomplete) == 1
    assert "shard 2/3 (5 images) missing" in noted._repr_html_()

    # Bundled again (merged on the cluster, taken home): the set's shards travel with the runs.
    home = segdiff_here(capsys, "bundle", tmp_path / "home.h5", "--cache", merged)
    assert "wrote 11 runs" in home.stdout and "with 2 test-set shards" in home.stdout
    assert (
        segdiff_here(capsys, "merge", tmp_path / "home.h5", "--cache", tmp_path / "h").returncode
        == 0
    )
    swept = segdiff_here(capsys, "sweep", "--cache", tmp_path / "h")
    assert swept.returncode == 1 and "11 of 16 images (incomplete)" in swept.stdout

    result = segdiff_here(capsys, "merge", tmp_path / "results" / bundles[1], "--cache", merged)
    assert "all 3 shards merged (16 images)" in result.stdout
    swept = segdiff_here(capsys, "sweep", "--cache", merged)
    assert swept.returncode == 0, swept.stderr
    assert "Test set: 16 images against" in " ".join(swept.stdout.split())


def test_a_task_that_failed_on_an_image_is_named_after_every_shard_is_merged(
    capsys, tmp_path, monkeypatch, fake_engine
):
    for number in (1, 3):
        assert _shard(capsys, tmp_path, number).returncode == 0
    monkeypatch.setenv("FAKE_ENGINE_FAIL_ON_IMAGE", "cell_07.png")  # shard 2 holds 5–9
    result = _shard(capsys, tmp_path, 2)
    assert result.returncode == 1  # a run failed
    assert "of shard 2/3" in result.stdout and "runs are missing for 1 image of it" in result.stdout
    bundles = sorted((tmp_path / "results").iterdir())
    merged = tmp_path / "merged"
    result = segdiff_here(capsys, "merge", *bundles, "--cache", merged)
    assert "1 image of the shards present without runs (cell_07.png)" in " ".join(
        result.stderr.split()
    )
    swept = segdiff_here(capsys, "sweep", "--cache", merged)
    assert swept.returncode == 1
    shown = " ".join(swept.stdout.split())
    assert "Test set: 15 of 16 images (incomplete)" in shown
    assert "without runs (cell_07.png)" in shown
    # The shard's own bundle, swept alone, is its shard: never the set.
    alone = segdiff_here(capsys, "sweep", "--bundle", bundles[0])
    assert "Test set: 5 of 16 images (incomplete)" in " ".join(alone.stdout.split())


@pytest.fixture
def desk(tmp_path, monkeypatch, fake_engine) -> None:
    """Where a slurm-script is written: its own cache (where what the model takes is
    remembered), the model asked of the fake engine (a one-channel model, as the demo's)."""
    monkeypatch.setenv("SEGDIFF_CACHE", str(tmp_path / "desk cache"))


def test_the_slurm_script_carries_the_runs_options_and_the_merge_that_follows(
    capsys, tmp_path, monkeypatch, desk
):
    monkeypatch.chdir(tmp_path)
    made = segdiff_here(
        capsys, "slurm-script", "--shards", "4", "--gres", "gpu:1", "--time", "01:00:00",
        demo_model(), demo_dir() / "images", "--config", "device=gpu:0,batch=8",
        "--repeats", "3", "--trust-model",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    results = tmp_path / "segdiff-results"
    assert results.is_dir()  # Slurm writes the tasks' logs there: it must exist at submission
    for line in (
        "#SBATCH --array=1-4",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --time=01:00:00",
        f"#SBATCH --chdir={tmp_path}",
        f"#SBATCH --output={results}/slurm-%A_%a.log",
    ):
        assert line in lines
    (run,) = [line for line in lines if " run " in line and not line.startswith("#")]
    assert run.endswith(
        f"{demo_model()} {demo_dir() / 'images'} --config device=gpu:0,batch=8 --repeats 3 "
        f"--trust-model --shard slurm --bundle {results}"
    )
    segdiff = f"{sys.executable} -m segdiff_gui.cli"  # the very installation that wrote it
    assert run.startswith(f"{segdiff} run ")
    merge = [line for line in lines if line.startswith("#   ")]
    assert merge[0] == (
        f"#   {segdiff} merge {results}/shard-*-of-4.h5 && {segdiff} sweep --model "
        "unet_sigmoid.keras"
    )


def test_a_sweep_run_where_shards_were_merged_counts_its_own_set_and_a_shard_is_a_shard(
    capsys, tmp_path, fake_engine
):
    for number in (1, 3):
        assert _shard(capsys, tmp_path, number).returncode == 0
    merged = tmp_path / "merged"
    bundles = sorted((tmp_path / "results").iterdir())
    assert segdiff_here(capsys, "merge", *bundles, "--cache", merged).returncode == 0
    # The whole set run here, into the cache that holds shards 1 and 3: whole, and said so.
    whole = segdiff_here(
        capsys, "run", demo_model(), demo_dir() / "images", "--sweep", "--config", "batch=1",
        "--repeats", "1", "--cache", merged,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "Test set: 16 images against" in " ".join(whole.stdout.split())
    swept = segdiff_here(capsys, "sweep", "--cache", merged)
    assert swept.returncode == 0 and "Incomplete" not in swept.stdout
    # A shard's own run reports its shard as part of the set, and passes: it is one by design.
    shard = segdiff_here(
        capsys, "run", demo_model(), demo_dir() / "images", "--shard", "2/3", "--config",
        "batch=1", "--repeats", "1", "--cache", tmp_path / "alone",
    )  # fmt: skip
    assert shard.returncode == 0
    assert "Test set: 5 of 16 images (incomplete)" in " ".join(shard.stdout.split())


def test_shards_run_with_other_configurations_are_not_one_whole_set(capsys, tmp_path, fake_engine):
    # A stale bundle of an earlier job, say: shard 2 ran without batch 2.
    for number in (1, 3):
        assert _shard(capsys, tmp_path, number, "--config", "batch=2").returncode == 0
    assert _shard(capsys, tmp_path, 2).returncode == 0
    merged = tmp_path / "merged"
    bundles = sorted((tmp_path / "results").iterdir())
    result = segdiff_here(capsys, "merge", *bundles, "--cache", merged)
    assert "all 3 shards merged" not in result.stdout
    assert "shard 2/3 was run without cpu b2 r0" in " ".join(result.stderr.split())
    swept = segdiff_here(capsys, "sweep", "--cache", merged)
    assert swept.returncode == 1
    assert "shard 2/3 was run without cpu b2 r0" in " ".join(swept.stdout.split())


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["--shards", "3", demo_model(), demo_dir() / "images", "--shard", "1/3"],
         "sets --shard itself"),
        (["--shards", "17", demo_model(), demo_dir() / "images"], "17 is not from 1 to the 16"),
        (["--shards", "2", demo_model(), demo_dir() / "images", "--repeats", "x"],
         "not what 'segdiff run' takes"),
        (["--shards", "2", demo_dir() / "absent.keras", demo_dir() / "images"],
         "no such model file"),
        (["--shards", "2", demo_model(), demo_dir() / "images", "--config", "bogus=1"],
         "unknown config key 'bogus'"),
        (["--shards", "2", demo_model(), demo_dir() / "images", "--masks", "absent"],
         "no such folder of ground-truth masks"),
        (["--shards", "2", demo_model(), demo_dir() / "images", "--targ", "cell_00.png"],
         "sets --target itself"),
        (["--shards", "2", demo_model(), demo_dir() / "images", "--cache", "c"],
         "sets --cache itself"),
        (["--shards", "2", "--", demo_model(), demo_dir() / "images"], "drop '--'"),
        (["--shards", "2", "--results", "out.h5", demo_model(), demo_dir() / "images"],
         "--results names a folder"),
    ],
)  # fmt: skip
def test_a_slurm_script_for_a_run_that_would_fail_is_refused_at_the_desk(
    capsys, tmp_path, monkeypatch, arguments, problem, desk
):
    monkeypatch.chdir(tmp_path)
    refused = segdiff_here(capsys, "slurm-script", *arguments)
    assert refused.returncode == 2
    assert problem in refused.stderr.splitlines()[-1]
    assert "#!/bin/bash" not in refused.stdout


def test_sbatch_lines_take_paths_with_spaces_and_percent_signs_as_sbatch_reads_them(
    capsys, tmp_path, monkeypatch, desk
):
    # sbatch reads double quotes on an #SBATCH line (not a shell's single ones), and expands %.
    monkeypatch.chdir(tmp_path)
    made = segdiff_here(
        capsys, "slurm-script", "--shards", "2", "--results", "my 100% results",
        "--job-name", "seg diff", demo_model(), demo_dir() / "images",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    assert f'#SBATCH --output="{tmp_path}/my 100%% results/slurm-%A_%a.log"' in lines
    assert '#SBATCH --job-name="seg diff"' in lines
    refused = segdiff_here(
        capsys, "slurm-script", "--shards", "2", "--job-name", 'say "hi"', demo_model(),
        demo_dir() / "images",
    )  # fmt: skip
    assert refused.returncode == 2 and "cannot be written on an #SBATCH line" in refused.stderr


def test_a_sweep_run_whole_is_never_said_in_shards(capsys, tmp_path, monkeypatch, fake_engine):
    """``run --sweep`` with one image failing said "(set 865a0b5b, 1 shards); 1
    image of the shards present without runs": a set run whole has no shards to speak of."""
    images = sorted((demo_dir() / "images").iterdir())[:4]
    monkeypatch.setenv("FAKE_ENGINE_FAIL_ON_IMAGE", images[2].name)
    result = segdiff_here(
        capsys, "run", demo_model(), *images, "--sweep", "--config", "batch=1", "--repeats", "1",
        "--cache", tmp_path / "cache", "--bundle", tmp_path / "whole.h5",
    )  # fmt: skip
    assert result.returncode == 1  # a run failed: an incomplete set is never a pass
    said = " ".join((result.stdout + result.stderr).split())
    assert f"(set {_set_id(tmp_path / 'cache')}); 1 image without runs ({images[2].name})." in said
    assert "wrote 3 runs of the whole test set to" in said
    assert "shard" not in said
    monkeypatch.delenv("FAKE_ENGINE_FAIL_ON_IMAGE")
    again = segdiff_here(
        capsys, "run", demo_model(), *images, "--sweep", "--config", "batch=1", "--repeats", "1",
        "--cache", tmp_path / "cache", "--bundle", tmp_path / "whole.h5",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    merged = segdiff_here(capsys, "merge", tmp_path / "whole.h5", "--cache", tmp_path / "home")
    assert f"test set {_set_id(tmp_path / 'cache')}: all 4 images merged" in merged.stdout
    assert "shard" not in merged.stdout + merged.stderr


def _set_id(cache) -> str:
    (folder,) = (cache / "test-sets").iterdir()
    return folder.name[:8]


def test_a_slurm_script_whose_images_the_model_cannot_take_is_refused_at_the_desk(
    capsys, tmp_path, monkeypatch, desk
):
    """A 1-channel image for an RGB model was written into a script whose every
    task would fail. The model's input is asked of a child (remembered, as ``run`` remembers
    it) and every image checked as the planner checks one it will compute."""
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAKE_ENGINE_INPUT_CHANNELS", "3")  # an RGB model
    images = tmp_path / "images"
    images.mkdir()
    for index in range(3):
        Image.fromarray(np.full((8, 8), index, dtype=np.uint8)).save(images / f"g{index}.png")
    refused = segdiff_here(capsys, "slurm-script", "--shards", "2", demo_model(), images)
    assert refused.returncode == 2 and "#!/bin/bash" not in refused.stdout
    assert refused.stderr == (
        f"segdiff: {images / 'g0.png'}: model expects 3 channel(s), image has 1; it needs RGB "
        "input (colour conversion) — add --color rgb\n"
    )
    # The same check as run's planner: the model's answer remembered, run refuses the image
    # before any child (the fake's run child checks no channels: it would compute it).
    ran = segdiff_here(capsys, "run", demo_model(), images, "--config", "batch=1")
    assert (ran.returncode, ran.stderr) == (2, refused.stderr)
    made = segdiff_here(capsys, "slurm-script", "--shards", "2", demo_model(), images,
                        "--color", "rgb")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("#!/bin/bash")
