"""explain, diagnose and the test-set sweep on the real demo, through the real command line."""

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.resources import demo_dir, demo_images, demo_model
from segdiff_gui.storage.cache import ResultCache
from tests.conftest import segdiff, segdiff_here

pytestmark = pytest.mark.slow

FIGURES = ("max_ulp", "max_abs", "differing_pixels", "flips")
IMAGES = 4  # of the demo's 16, for the sweep


def test_explain_reports_what_direct_comparisons_give(demo_cache, tmp_path, capsys):
    """The target's batch is 2, not the demo matrix's 64: explain computes the batch knob's
    runs itself (a batch of two is filled with two images, one of 64 with 64), and compare
    measures them from the cache as it does the demo's own runs of the other knobs."""
    root = tmp_path / "cache"
    shutil.copytree(demo_cache.root, root)
    target = "batch=2,threads=1,xla=on,precision=bf16"
    result = segdiff(
        "explain", "--demo", "--from", "device=cpu,batch=1", "--to", target,
        "--cache", root, "--json", "--repeats", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    attribution = json.loads(result.stdout)
    alone = {row["knob"]: row for row in attribution["rows"] if row["kind"] == "alone"}
    assert list(alone) == ["batch", "threads", "xla", "precision"]
    # The demo's own matrix holds the other knobs alone, explain made batch 2's: compare
    # gives the same figures.
    compare = json.loads(segdiff_here(capsys, "compare", "--cache", root, "--json").stdout)[0]
    direct = {row["label"]: row for row in compare["comparisons"]}
    for knob, label in [
        ("batch", "cpu b2 r0"),
        ("threads", "cpu b1 threads1 r0"),
        ("xla", "cpu b1 xla r0"),
        ("precision", "cpu b1 bf16 r0"),
    ]:
        assert {f: alone[knob][f] for f in FIGURES} == {f: direct[label][f] for f in FIGURES}
    total = next(row for row in attribution["rows"] if row["kind"] == "total")
    assert {f: total[f] for f in FIGURES} == {
        f: direct["cpu b2 threads1 xla bf16 r0"][f] for f in FIGURES
    }
    # Whether one thread moves the demo's map is the CPU's kernels' to say (136 pixels with
    # oneDNN off on the CPU first measured, none with it on, none with it off on one with
    # AVX-512 BF16); the row is the direct comparison's, checked above.
    assert alone["precision"]["flips"] > 0
    repeats = [row for row in attribution["rows"] if row["kind"] == "repeats"]
    assert len(repeats) == 8 and all(row["differing_pixels"] == 0 for row in repeats)
    cumulative = [row for row in attribution["rows"] if row["kind"] == "cumulative"]
    assert cumulative[-1]["to"] == "cpu b2 threads1 xla bf16"

    # Two cached runs by label: measured from the cache alone, no child started.
    text = segdiff_here(
        capsys, "explain", "--from", "cpu b1 r0", "--to", "cpu b2 threads1 xla bf16 r1",
        "--cache", root,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert "What moves cpu b1 to cpu b2 threads1 xla bf16" in text.stdout
    assert "Largest single knob: precision" in text.stdout  # bfloat16's flips
    assert "cpu b1 r0 (" in text.stdout and "against cpu b2 threads1 xla bf16 r1 (" in text.stdout
    # A configuration's label alone means its first repeat; --image narrows the runs named.
    by_label = segdiff_here(capsys, "explain", "--from", "cpu b1", "--to", "cpu b1 xla",
                            "--image", "cell_00.png", "--cache", root, "--json")  # fmt: skip
    assert by_label.returncode == 0, by_label.stderr
    (xla,) = [row for row in json.loads(by_label.stdout)["rows"] if row["kind"] == "alone"]
    assert {f: xla[f] for f in FIGURES} == {f: direct["cpu b1 xla r0"][f] for f in FIGURES}
    mixed = segdiff_here(
        capsys, "explain", "--from", "cpu b1 r0", "--to", "batch=64", "--cache", root
    )
    assert mixed.returncode == 2 and "both key=value specs, or both name" in mixed.stderr
    same = segdiff_here(
        capsys, "explain", "--demo", "--from", "batch=1", "--to", "device=cpu", "--cache", root
    )
    assert same.returncode == 2 and "the two configurations are one (cpu b1)" in same.stderr


def test_explain_needs_a_model_for_specs(tmp_path):
    result = segdiff("explain", "--from", "batch=1", "--to", "batch=2", "--cache", tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("name the model and images (or --demo) to run SPECs on")


def test_explain_refuses_the_exact_reference_before_any_run(demo, tmp_path, capsys):
    """precision=float64 is compared beside the reference: explaining it knob by
    knob would measure its float64 map as a float32 run, rounded on the way."""
    model, images = demo
    result = segdiff_here(capsys, "explain", model, images[0], "--from", "batch=1", "--to",
                          "precision=fp64", "--cache", tmp_path / "cache")  # fmt: skip
    assert result.returncode == 2, result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.endswith(
        "explain: cpu b1 fp64 is the exact reference (float64): it is compared beside the "
        "reference as every run's error against it, not explained knob by knob among float32 "
        "runs"
    ), line
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.h5"))


def test_diagnose_says_only_what_was_measured(demo_cache, capsys):
    result = segdiff_here(capsys, "diagnose", "--cache", demo_cache.root, "--json")
    assert result.returncode == 0, result.stderr
    (study,) = json.loads(result.stdout)
    findings = study["findings"]
    topics = {f["topic"] for f in findings}
    assert {"repeatability", "knobs", "cutoff", "advice", "not measured"} <= topics
    gpu_sentences = [f["sentence"] for f in findings if "GPU" in f["sentence"]]
    assert gpu_sentences and all(f.startswith("No GPU run was measured") for f in gpu_sentences)
    precision = next(f for f in findings if "precision policy alone" in f["sentence"])
    assert precision["link"].startswith("https://www.tensorflow.org/")
    text = segdiff_here(capsys, "diagnose", "--cache", demo_cache.root).stdout
    assert "How to avoid it" in text and "bitwise-equal maps over its 2 repeats" in text


def _independent_dice(cache_root, masks, config_label):
    """Dice straight from the HDF5 maps and the PNG masks, without segdiff's analysis."""
    cache = ResultCache(cache_root)
    scores = []
    for record in cache.records():
        if record.label != f"{config_label} r0":
            continue
        probabilities = cache.read_run(record.key).probabilities
        predicted = np.asarray(probabilities).reshape(probabilities.shape[:2]) >= np.float32(0.5)
        truth = np.asarray(Image.open(masks / record.target_name)) > 0
        scores.append(2 * (predicted & truth).sum() / (predicted.sum() + truth.sum()))
    return float(np.mean(scores)), len(scores)


def test_sweep_dice_and_shards_merged_equal_the_unsharded_sweep(tmp_path, capsys):
    # Four of the demo's images (and their masks): one whole batch of 4, two shards of two.
    model, images, masks = demo_model(), tmp_path / "images", tmp_path / "masks"
    for folder in (images, masks):
        folder.mkdir()
        for image in demo_images()[:IMAGES]:
            shutil.copy(demo_dir() / folder.name / image.name, folder)
    configs = ["--config", "batch=1", "--config", "batch=4", "--config", "precision=bf16"]
    whole = tmp_path / "whole"
    result = segdiff("run", model, images, *configs, "--sweep", "--masks", masks,
                     "--repeats", "1", "--cache", whole, "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    sweep = json.loads(result.stdout)["sweep"]
    assert len(sweep["images"]) == IMAGES
    rows = {row["configuration"]: row for row in sweep["configurations"]}
    for label in ("cpu b1", "cpu b4", "cpu b1 bf16"):
        dice, count = _independent_dice(whole, masks, label)
        assert count == IMAGES and rows[label]["mean_dice"] == pytest.approx(dice, abs=1e-12)
    assert rows["cpu b1 bf16"]["delta_mean_dice"] == pytest.approx(
        rows["cpu b1 bf16"]["mean_dice"] - rows["cpu b1"]["mean_dice"]
    )
    assert rows["cpu b1 bf16"]["flips"] > 0

    merged = tmp_path / "merged"
    for shard in ("1/2", "2/2"):
        part = tmp_path / f"shard{shard[0]}"
        result = segdiff("run", model, images, *configs, "--shard", shard, "--repeats", "1",
                         "--cache", part)  # fmt: skip
        assert result.returncode == 0, result.stderr
        bundle = tmp_path / f"shard{shard[0]}.h5"
        assert segdiff_here(capsys, "bundle", bundle, "--cache", part).returncode == 0
        assert segdiff_here(capsys, "merge", bundle, "--cache", merged).returncode == 0
    whole_cache, merged_cache = ResultCache(whole), ResultCache(merged)
    keys = sorted(r.key for r in whole_cache.records())
    assert sorted(r.key for r in merged_cache.records()) == keys and len(keys) == IMAGES * 3
    for key in keys:
        ours = whole_cache.read_run(key).probabilities
        theirs = merged_cache.read_run(key).probabilities
        assert ours.tobytes() == theirs.tobytes()
    again = segdiff_here(capsys, "sweep", "--masks", masks, "--cache", merged, "--json")
    assert again.returncode == 0, again.stderr
    merged_sweep = json.loads(again.stdout)
    # Each shard's cache recorded its shard, its bundle carried it: the set counts as whole.
    (two,) = merged_sweep.pop("test_sets")
    (one,) = sweep.pop("test_sets")
    assert (two["shards"], two["present"], one["shards"], one["present"]) == (2, IMAGES, 1, IMAGES)
    assert merged_sweep == sweep

    csv_file = tmp_path / "sweep.csv"
    text = segdiff_here(capsys, "sweep", "--masks", masks, "--cache", merged, "--csv", csv_file)
    assert "mean Dice" in text.stdout and "Images with the most flips" in text.stdout
    assert len(csv_file.read_text().splitlines()) == 1 + IMAGES * 3


def test_sweep_of_a_softmax_model_scores_every_class(tmp_path):
    result = segdiff("run", demo_model("softmax3"), demo_dir() / "images", "--config", "batch=1",
                     "--masks", demo_dir() / "masks3", "--repeats", "1", "--cache", tmp_path,
                     "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    sweep = json.loads(result.stdout)["sweep"]
    assert sweep["kind"] == "softmax"
    (row,) = sweep["configurations"]
    assert 0.5 < row["mean_dice"] <= 1 and row["images"] == 16


def test_an_empty_shard_is_no_error_and_a_bad_one_is(tmp_path):
    # A scheduler's array may be larger than the set: shard 1/2 of one image holds nothing.
    result = segdiff("run", demo_model(), demo_dir() / "images" / "cell_00.png", "--shard", "1/2",
                     "--cache", tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "shard 1/2 of 1 images is empty" in result.stderr
    assert not list(tmp_path.glob("runs/**/*.h5"))
    bad = segdiff("run", demo_model(), demo_dir() / "images", "--shard", "4/3")
    assert bad.returncode == 2 and "K must be between 1 and N" in bad.stderr


def test_masks_of_the_wrong_size_are_refused_before_any_run(tmp_path):
    masks = tmp_path / "masks"
    masks.mkdir()
    Image.fromarray(np.zeros((10, 12), dtype=np.uint8)).save(masks / "cell_03.png")
    result = segdiff("run", demo_model(), demo_dir() / "images", "--sweep", "--masks", masks,
                     "--cache", tmp_path / "cache")  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "cell_03.png: is 10×12 but its image cell_03.png is 256×256"
    )
    assert "finished" not in result.stderr  # no child ran
