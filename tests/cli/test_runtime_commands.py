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
    assert alone["runtime"]["flips"] > 0 and alone["batch"]["flips"] == 0
    # The row is the comparison of the two cached maps.
    runs = data["runs"]
    (int8,) = [label for label in runs if label.startswith("litert-int8 cpu b1 cal16#")]
    keras = cache.read_run(runs["cpu b1 r0"]).probabilities
    converted = cache.read_run(runs[int8]).probabilities
    measured = compare_maps(keras, converted)
    assert alone["runtime"]["flips"] == measured.flips
    assert alone["runtime"]["max_abs"] == measured.max_abs


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
    assert rows["litert cpu b1"]["flips"] == 0 and rows["litert cpu b1"]["delta_mean_dice"] == 0
    int8 = rows["litert-int8 cpu b1"]
    assert int8["flips"] > 0 and int8["delta_mean_dice"] != 0
    assert np.isclose(int8["mean_dice"] - rows["cpu b1"]["mean_dice"], int8["delta_mean_dice"])
