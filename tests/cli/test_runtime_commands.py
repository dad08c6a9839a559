"""The analysis commands treat a conversion as a knob: ``explain`` attributes the demo's flips
to converting to LiteRT full int8, and the test-set sweep gives the Dice change per runtime
(does quantization change the number in the paper?)."""

import json
import re

import numpy as np
import pytest

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here

pytestmark = pytest.mark.slow


def test_explain_attributes_the_flips_to_the_conversion(tmp_path, capsys):
    cache = ResultCache(tmp_path / "cache")
    result = segdiff_here(
        capsys, "explain", "--demo", "--from", "runtime=tensorflow",
        "--to", "runtime=litert-int8,batch=4",
        "--repeats", "1", "--cache", cache.root, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    alone = {row["knob"]: row for row in data["rows"] if row["kind"] == "alone"}
    assert alone["runtime"]["change"] == "TensorFlow → LiteRT full int8"
    assert alone["runtime"]["flips"] > 0  # full int8, far coarser than float32's steps
    # Each row is the comparison of the two cached maps (the batch's flips, if any, are this
    # CPU's kernels' own).
    runs = data["runs"]
    (int8,) = [label for label in runs if label.startswith("litert-int8 cpu b1 cal16#")]
    keras = cache.read_run(runs["cpu b1 r0"]).probabilities
    for knob, other in (("runtime", int8), ("batch", "cpu b4 r0")):
        measured = compare_maps(keras, cache.read_run(runs[other]).probabilities)
        assert alone[knob]["flips"] == measured.flips, knob
        assert alone[knob]["max_abs"] == measured.max_abs, knob
    assert alone["batch"]["flips"] < alone["runtime"]["flips"]


def test_the_sweep_gives_the_dice_change_per_runtime(demo, tmp_path, capsys):
    model, images = demo
    cache = ResultCache(tmp_path / "cache")
    masks = model.with_name("masks")
    specs = ["runtime=tensorflow", "runtime=litert", "runtime=litert-int8"]
    configs = [arg for spec in specs for arg in ("--config", spec)]
    ran = segdiff_here(
        capsys,
        "run",
        model,
        *images[:4],
        "--sweep",
        *configs,
        "--repeats",
        "1",
        "--cache",
        cache.root,
    )
    assert ran.returncode == 0, ran.stderr
    result = segdiff_here(capsys, "sweep", "--cache", cache.root, "--masks", masks, "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)["configurations"]
    # Full int8 is named with its calibration set: the four images.
    rows = {re.sub(r" cal4#\w+$", "", row["configuration"]): row for row in shown}
    assert set(rows) == {"cpu b1", "litert cpu b1", "litert-int8 cpu b1"}
    assert all(row["truth_images"] == 4 for row in rows.values())
    # Each runtime's flips against TensorFlow's maps, image by image, recomputed here: LiteRT
    # float32's are whatever few pixels lie within its float32 steps of the cutoff on this
    # CPU (none on the CPUs measured), full int8's many more.
    maps: dict[tuple[str, str], np.ndarray] = {}
    for record in cache.records():
        maps[record.run_config.runtime, record.target_name] = cache.read_run(
            record.key
        ).probabilities
    targets = {target for _, target in maps}
    for runtime, row in (("litert", "litert cpu b1"), ("litert-int8", "litert-int8 cpu b1")):
        flips = sum(
            compare_maps(maps["tensorflow", t], maps[runtime, t], cutoff=0.5).flips for t in targets
        )
        assert rows[row]["flips"] == flips, row
        assert flips or rows[row]["delta_mean_dice"] == 0, row
    int8 = rows["litert-int8 cpu b1"]
    assert int8["flips"] > rows["litert cpu b1"]["flips"] and int8["delta_mean_dice"] != 0
    assert np.isclose(int8["mean_dice"] - rows["cpu b1"]["mean_dice"], int8["delta_mean_dice"])
