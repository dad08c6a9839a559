"""The user's own artefact beside its Keras source, fast: a tiny real ``.tflite``
(tests/hostile/artefact_files.py) and the demo's ``.keras`` as its source, planned by the real
runner and computed by the fake engine, through the command line, the Python API and the
window. Both models' runs are one study, the artefact's named with its file name; an
artefact that does not fit its source is one line naming both shapes. (Real children match
the demo's int8 artefact to its source in tests/engine/test_artefact_source.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui import api
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.studies import comparable_groups
from tests.conftest import segdiff_here
from tests.factories import ARTEFACT_RUNS, SOURCE_RUNS, artefact_files


@pytest.fixture
def files(tmp_path) -> dict[str, Path | list[Path]]:
    return artefact_files(tmp_path)


def _run(capsys, files, cache, *more):
    return segdiff_here(
        capsys, "run", files["artefact"], *files["images"], "--source", files["source"],
        "--cache", cache, "--repeats", "1", *more,
    )  # fmt: skip


def test_the_artefact_s_runs_and_its_source_s_are_one_study(files, tmp_path, capsys, fake_engine):
    cache = tmp_path / "cache"
    ran = _run(capsys, files, cache, "--json")
    assert ran.returncode == 0, ran.stderr
    assert [run["label"] for run in json.loads(ran.stdout)["runs"]] == SOURCE_RUNS + ARTEFACT_RUNS
    store = ResultCache(cache)
    records = [store.read_run(key, with_map=False) for key in store.keys()]
    (group,) = comparable_groups(records)  # one study: the exact run is beside it, not in it
    assert {r.label for r in group} == {"cpu b1 r0", "cpu b64 r0", *ARTEFACT_RUNS}
    artefact = next(r for r in records if r.model_name == "model.tflite")
    source = artefact.provenance.source
    assert source is not None and source.name == "unet_sigmoid.keras"
    assert artefact.study_model_name == "unet_sigmoid.keras"
    # compare: the artefact's runs against the source's reference, each against the exact run.
    compared = segdiff_here(capsys, "compare", "--cache", cache, "--json")
    assert compared.returncode == 0, compared.stderr
    (summary,) = json.loads(compared.stdout)
    assert summary["reference"] == "cpu b1 r0" and summary["model"] == "unet_sigmoid.keras"
    assert {row["label"] for row in summary["comparisons"]} == {"cpu b64 r0", *ARTEFACT_RUNS}
    assert summary["exact"]["run"] == "cpu b1 fp64 r0"
    errors = {row["label"]: row for row in summary["exact"]["errors"]}
    assert set(errors) == {"cpu b1 r0", "cpu b64 r0", *ARTEFACT_RUNS}
    listed = segdiff_here(capsys, "compare", "--cache", cache)
    assert "unet_sigmoid.keras with model.tflite on cell_0.png" in listed.stdout
    # diagnose says the artefact apart: its own model, not a runtime knob of the source's.
    diagnosed = segdiff_here(capsys, "diagnose", "--cache", cache)
    assert diagnosed.returncode == 0, diagnosed.stderr
    text = " ".join(diagnosed.stdout.split())
    assert "Your artefact model.tflite, run as it is under LiteRT" in text
    assert "Changing the runtime alone" not in text
    # explain between the source's run and the artefact's: the step is the other model, not
    # the source's own conversion to LiteRT.
    explained = segdiff_here(capsys, "explain", "--cache", cache, "--from", "cpu b1 r0", "--to",
                             ARTEFACT_RUNS[0], "--json")  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    steps = {row["change"] for row in json.loads(explained.stdout)["rows"] if row["knob"] != "all"}
    assert steps == {"unet_sigmoid.keras under TensorFlow → model.tflite under LiteRT"}
    # The CI gate across both: every run checked against the reference, the artefact's too.
    checked = segdiff_here(capsys, "check", "--cache", cache, "--max-flips", "1000000")
    assert checked.returncode == 0, checked.stderr
    assert "3 runs checked" in checked.stdout


def test_the_source_s_run_is_the_reference_though_only_the_artefact_s_is_at_the_defaults(
    files, tmp_path, capsys, fake_engine
):
    # The source runs at batch 64 alone: the artefact's batch-1 run is nearer the defaults,
    # but the reference is the source's, in a study and in a sweep alike (one rule).
    cache = tmp_path / "cache"
    ran = _run(capsys, files, cache, "--source-config", "batch=64", "--json")
    assert ran.returncode == 0, ran.stderr
    labels = [run["label"] for run in json.loads(ran.stdout)["runs"]]
    assert "cpu b64 r0" in labels and ARTEFACT_RUNS[0] in labels
    compared = segdiff_here(capsys, "compare", "--cache", cache, "--json")
    assert compared.returncode == 0, compared.stderr
    assert [study["reference"] for study in json.loads(compared.stdout)] == ["cpu b64 r0"]
    swept = segdiff_here(capsys, "sweep", "--cache", cache, "--json")
    assert swept.returncode == 0, swept.stderr
    assert json.loads(swept.stdout)["reference"] == "cpu b64"


def test_an_artefact_that_does_not_fit_its_source_is_one_line_naming_both_shapes(
    files, tmp_path, capsys, fake_engine, monkeypatch
):
    monkeypatch.setenv("FAKE_ENGINE_INPUT_CHANNELS", "3")  # the source takes RGB
    refused = _run(capsys, files, tmp_path / "cache")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.endswith(
        "model.tflite: does not fit its Keras source unet_sigmoid.keras: takes input "
        "N×8×8×1 where its source takes N×?×?×3"
    ), line
    assert not (tmp_path / "cache").exists() or not ResultCache(tmp_path / "cache").keys()


def test_a_source_beside_what_is_no_artefact_or_is_none_is_one_line(files, tmp_path, capsys):
    cache = ("--cache", tmp_path / "cache")
    keras = segdiff_here(capsys, "run", files["source"], *files["images"], "--source",
                         files["source"], *cache)  # fmt: skip
    assert keras.returncode == 2
    assert "a source goes beside an artefact" in keras.stderr
    alone = segdiff_here(capsys, "run", files["artefact"], *files["images"], "--source-config",
                         "batch=1", *cache)  # fmt: skip
    assert alone.returncode == 2 and "give the --source too" in alone.stderr
    artefact = segdiff_here(capsys, "run", files["artefact"], *files["images"], "--source",
                            files["artefact"], *cache)  # fmt: skip
    assert artefact.returncode == 2
    assert "is not a Keras model (.keras or legacy .h5)" in artefact.stderr


def test_the_api_runs_an_artefact_beside_its_source_and_its_specs_start_from_its_runtime(
    files, tmp_path, fake_engine
):
    cache = tmp_path / "cache"
    # A spec of the artefact's own runtime's knob needs no runtime=litert beside it.
    alone = api.run(files["artefact"], files["images"], "xnnpack=off", repeats=1, cache=cache,
                    progress=False)  # fmt: skip
    assert [run.label for run in alone.runs] == ["litert cpu b1 xnnpack-off r0"]
    study = api.run(
        files["artefact"], files["images"], "xnnpack=off", repeats=1, cache=cache,
        progress=False, source=files["source"], source_configs=["batch=1"],
    )  # fmt: skip
    assert [run.label for run in study.runs] == [
        "cpu b1 r0",
        "model.tflite litert cpu b1 xnnpack-off r0",
    ]
    assert study.model == "unet_sigmoid.keras"
    with pytest.raises(api.InputError, match="give the source too"):
        api.run(files["artefact"], files["images"], source_configs="batch=1", cache=cache,
                progress=False)  # fmt: skip


def test_an_artefact_s_layers_without_its_source_are_one_line_before_any_child(
    files, tmp_path, capsys
):
    refused = segdiff_here(capsys, "layers", files["artefact"], *files["images"], "--from",
                           "xnnpack=on", "--to", "xnnpack=off", "--cache",
                           tmp_path / "cache")  # fmt: skip
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "model.tflite: is your own artefact: its layers are compared with those of" in line
    assert line.endswith("add --source MODEL"), line


def test_a_sharded_sweep_beside_the_source_merges_into_one_whole_set(
    files, tmp_path, capsys, fake_engine
):
    # Each shard's runs are the source's and the artefact's: the set is the study's (the
    # source's model), counted whole once both shards are merged, as the unsharded sweep is.
    folder = tmp_path / "images"
    folder.mkdir()
    for index in range(4):
        Image.fromarray(np.full((8, 8), 30 + 50 * index, np.uint8)).save(folder / f"c{index}.png")
    common = (files["artefact"], folder, "--source", files["source"], "--source-config",
              "batch=1", "--config", "batch=1", "--repeats", "1")  # fmt: skip
    whole = segdiff_here(capsys, "run", *common, "--sweep", "--cache", tmp_path / "whole",
                         "--json")  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    (alone,) = json.loads(whole.stdout)["sweep"]["test_sets"]
    assert (alone["shards"], alone["present"], alone["size"]) == (1, 4, 4)
    merged = tmp_path / "merged"
    for shard in ("1/2", "2/2"):
        part = tmp_path / f"shard{shard[0]}"
        ran = segdiff_here(capsys, "run", *common, "--shard", shard, "--cache", part)
        assert ran.returncode == 0, ran.stderr
        bundle = tmp_path / f"shard{shard[0]}.h5"
        assert segdiff_here(capsys, "bundle", bundle, "--cache", part).returncode == 0
        joined = segdiff_here(capsys, "merge", bundle, "--cache", merged, "--json")
        assert joined.returncode == 0, joined.stderr
    (merged_set,) = json.loads(joined.stdout)["test_sets"]
    assert (merged_set["present"], merged_set["missing_shards"], merged_set["absent"]) == (
        4,
        [],
        [],
    )
    swept = segdiff_here(capsys, "sweep", "--cache", merged, "--json")
    assert swept.returncode == 0, swept.stderr
    (two,) = json.loads(swept.stdout)["test_sets"]
    assert (two["shards"], two["present"], two["size"], two["set"]) == (
        2, 4, 4, alone["set"],
    )  # fmt: skip
