"""A configuration the model cannot take is skipped, said in one line, and the
others run; the request is refused only where nothing would be left or it is strict. The one
rule is the planner's (runner/plan.py), and each front end says what it skipped: the command
line on stderr and in ``--json``, the API as a warning (with a bar or without), the window as
a row of the Runs list (tests/ui/test_skipped_configurations.py). A real SavedModel's
refusal, run by a real TensorFlow child beside it: tests/engine/test_formats.py."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import segdiff_gui
from segdiff_gui.core.config import parse_config_spec
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import PlanReady
from segdiff_gui.runner.plan import plan_matrix
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here
from tests.factories import saved_model

REFUSED = ("precision=float64", "emulate=tf32", "precision=mixed_bfloat16", "runtime=jax")


@pytest.fixture
def inputs(tmp_path) -> tuple[Path, Path]:
    image = tmp_path / "photo.png"
    Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8)).save(image)
    return saved_model(tmp_path / "model"), image


def test_the_planner_leaves_out_what_a_savedmodel_cannot_take(inputs, tmp_path):
    model, image = inputs
    configs = [parse_config_spec(spec) for spec in ("batch=1", *REFUSED, "batch=2")]
    cache = ResultCache(tmp_path / "cache")
    plan = plan_matrix(model, [image], configs, cache=cache, repeats=1, trust_model=True)
    assert [run.label for run in plan.runs] == ["cpu b1 r0", "cpu b2 r0"]
    assert [skip.config for skip in plan.skipped] == configs[1:-1]
    lines = [skip.line() for skip in plan.skipped]
    assert lines[0] == (
        f"skipped cpu b1 fp64: {model}: precision override needs a Keras model (.keras or "
        ".h5); a SavedModel's graph has fixed dtypes"
    )
    assert "emulate=tf32 rounds a Keras model's convolutions" in lines[1]
    assert "its graph runs only under TensorFlow, not jax" in lines[3]
    with pytest.raises(InputError, match="precision override needs a Keras model"):
        plan_matrix(model, [image], configs, cache=cache, repeats=1, trust_model=True,
                    strict=True)  # fmt: skip
    with pytest.raises(InputError, match="emulate=tf32 rounds"):  # nothing would be left
        plan_matrix(model, [image], configs[2:3], cache=cache, repeats=1, trust_model=True)


def test_a_runtime_not_installed_is_skipped_where_others_can_run(
    models, inputs, tmp_path, monkeypatch
):
    from segdiff_gui.core import runtimes

    _, image = inputs
    keras = models / "tiny.keras"
    cache = ResultCache(tmp_path / "cache")
    plain, torch = parse_config_spec("batch=1"), parse_config_spec("batch=1,runtime=torch")
    monkeypatch.setattr(runtimes.Runtime, "installed", lambda self: self.name != "torch")
    plan = plan_matrix(keras, [image], [plain, torch], cache=cache, repeats=1)
    assert [run.config for run in plan.runs] == [plain]
    assert [skip.label for skip in plan.skipped] == ["torch cpu b1"]
    assert "PyTorch is not installed in this Python" in str(plan.skipped[0].reason)
    with pytest.raises(InputError, match="PyTorch is not installed"):
        plan_matrix(keras, [image], [torch], cache=cache, repeats=1)


def test_the_command_line_runs_the_rest_and_says_each_skipped_configuration(
    inputs, tmp_path, capsys, fake_engine
):
    model, image = inputs
    cache = tmp_path / "cache"
    specs = [word for spec in ("batch=1", "precision=float64", "emulate=tf32")
             for word in ("--config", spec)]  # fmt: skip
    common = [model, image, *specs, "--trust-model", "--repeats", "1", "--cache", cache]
    ran = segdiff_here(capsys, "run", *common)
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "skipped" in line]
    assert said == [
        f"segdiff: skipped cpu b1 fp64: {model}: precision override needs a Keras model "
        "(.keras or .h5); a SavedModel's graph has fixed dtypes",
        f"segdiff: skipped cpu b1 emu-tf32: {model}: emulate=tf32 rounds a Keras model's "
        "convolutions and matrix multiplies; a SavedModel's graph calls TensorFlow's kernels "
        "itself (a .keras or .h5 model)",
    ]
    assert "1 run of model on photo.png: 1 computed, 0 from the cache, 0 failed; " \
        "2 configurations skipped" in ran.stdout  # fmt: skip
    as_json = segdiff_here(capsys, "run", *common, "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [run["status"] for run in data["runs"]] == ["cached"]
    assert [skip["label"] for skip in data["skipped"]] == ["cpu b1 fp64", "cpu b1 emu-tf32"]
    assert data["skipped"][0]["reason"].endswith("a SavedModel's graph has fixed dtypes")
    strict = segdiff_here(capsys, "run", *common, "--strict")
    assert strict.returncode == 2
    assert strict.stderr == (
        f"segdiff: {model}: precision override needs a Keras model (.keras or .h5); a "
        "SavedModel's graph has fixed dtypes\n"
    )
    nothing = segdiff_here(capsys, "run", model, image, "--config", "precision=float64",
                           "--trust-model", "--cache", cache)  # fmt: skip
    assert nothing.returncode == 2 and nothing.stderr.count("\n") == 1


@pytest.mark.parametrize("progress", [True, False])
def test_the_api_warns_of_each_skipped_configuration_with_a_bar_or_without(
    inputs, tmp_path, fake_engine, progress
):
    model, image = inputs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = segdiff_gui.run(model, image, ["batch=1", "emulate=tf32"], repeats=1,
                                trust_model=True, cache=tmp_path / "cache",
                                progress=progress)  # fmt: skip
    assert [run.label for run in study.runs] == ["cpu b1 r0"]
    said = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("skipped cpu b1 emu-tf32: ")


def test_plan_ready_carries_each_skipped_configuration_to_the_front_ends():
    ready = PlanReady(total=1, cached=0, children=1, skipped=(("cpu b1 fp64", "why"),))
    assert ready.skipped_lines() == ("skipped cpu b1 fp64: why",)
