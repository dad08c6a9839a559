"""compare, export, report and check on real demo runs, through the real command line (its
``main``, in this process: its engine children are real, or the fake engine where what is
shown of a cache is the point)."""

import csv
import json
import shutil

import numpy as np
import pytest

from segdiff_gui.core.analysis import flip_mask
from segdiff_gui.io.masks import read_mask
from segdiff_gui.storage import ResultCache
from tests.conftest import run_keys, segdiff_here

pytestmark = pytest.mark.slow


def record(cache, label):
    (match,) = [r for r in cache.records() if r.label == label]
    return cache.read_run(match.key)


def test_compare_matches_core_and_gives_verdicts(demo_cache, capsys):
    result = segdiff_here(capsys, "compare", "--cache", demo_cache.root, "--json")
    assert result.returncode == 0, result.stderr
    (study,) = json.loads(result.stdout)
    assert study["reference"] == "cpu b1 r0" and study["image"] == "cell_00.png"
    bf16 = next(row for row in study["comparisons"] if row["label"] == "cpu b1 bf16 r0")
    reference, other = record(demo_cache, "cpu b1 r0"), record(demo_cache, "cpu b1 bf16 r0")
    expected = int(flip_mask(reference.probabilities, other.probabilities, 0.5).sum())
    assert bf16["flips"] == expected > 0
    assert study["determinism"]["cpu b1"] == "bitwise deterministic over 2 repeats"
    text = segdiff_here(capsys, "compare", "--cache", demo_cache.root, "--cutoff", "0.3").stdout
    assert "flips @ 0.3" in text and "bitwise deterministic over 2 repeats" in text


def test_export_writes_the_mask_core_computes_and_an_exact_csv(demo_cache, tmp_path, capsys):
    reference, other = record(demo_cache, "cpu b1 r0"), record(demo_cache, "cpu b1 bf16 r0")
    result = segdiff_here(
        capsys,
        "export",
        "--cache",
        demo_cache.root,
        "--ref",
        reference.short_id,
        "--other",
        "cpu b1 bf16 r0",
        "--cutoff",
        "0.5",
        "--mask",
        tmp_path / "m.png",
        "--csv",
        tmp_path / "f.csv",
    )
    assert result.returncode == 0, result.stderr
    expected = flip_mask(reference.probabilities, other.probabilities, 0.5)
    assert np.array_equal(read_mask(tmp_path / "m.png"), expected)
    rows = list(csv.DictReader((tmp_path / "f.csv").open()))
    assert len(rows) == expected.sum()
    first = rows[0]
    r, c = int(first["row"]), int(first["column"])
    assert np.float32(first["cpu b1 bf16 r0 value"]) == other.probabilities[r, c]
    assert np.float32(first["cpu b1 r0 value"]) == reference.probabilities[r, c]


def test_export_refuses_ambiguous_and_unknown_names(demo_cache, tmp_path, capsys):
    result = segdiff_here(
        capsys,
        "export",
        "--cache",
        demo_cache.root,
        "--ref",
        "cpu b1 r0",
        "--other",
        "nosuch",
        "--mask",
        tmp_path / "m.png",
    )
    assert result.returncode == 2 and "nosuch: names no run in the cache" in result.stderr


def test_report_writes_json_and_a_self_contained_html(demo_cache, tmp_path, capsys):
    result = segdiff_here(
        capsys,
        "report",
        "--cache",
        demo_cache.root,
        "--html",
        tmp_path / "r.html",
        "--json",
        tmp_path / "r.json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["model"] == "unet_sigmoid.keras" and len(data["runs"]) == 10
    assert data["runs"][0]["provenance"]["tf_version"].startswith("2.")
    html = (tmp_path / "r.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "<svg" in html
    assert 'src="http' not in html and "<link" not in html and "<script" not in html


def test_check_gates_on_bounds(demo_cache, capsys):
    strict = segdiff_here(capsys, "check", "--cache", demo_cache.root)
    assert strict.returncode == 1
    assert "FAIL cpu b1 bf16 r0 (unet_sigmoid.keras on cell_00.png): flips" in strict.stdout
    loose = segdiff_here(capsys, "check", "--cache", demo_cache.root, "--max-flips", "1000000")
    assert loose.returncode == 0 and loose.stdout.startswith("OK: 9 runs checked")
    ulp = segdiff_here(
        capsys, "check", "--cache", demo_cache.root, "--max-flips", "1000000", "--max-ulp", "0"
    )
    assert ulp.returncode == 1 and "max ulp" in ulp.stdout


def test_compare_a_bundle_without_merging(demo_cache, tmp_path, capsys):
    bundle = tmp_path / "b.h5"
    assert (
        segdiff_here(
            capsys, "bundle", bundle, "cpu b1 r0", "cpu b64 r0", "--cache", demo_cache.root
        ).returncode
        == 0
    )
    result = segdiff_here(
        capsys, "compare", "--bundle", bundle, "--json", "--cache", tmp_path / "empty"
    )
    assert result.returncode == 0, result.stderr
    (study,) = json.loads(result.stdout)
    assert [row["label"] for row in study["comparisons"]] == ["cpu b64 r0"]


def test_softmax_compare_uses_argmax_and_maps_are_stored_whole(softmax_cache, tmp_path, capsys):
    """The session's softmax runs (``softmax_cache``: batch 1 and bfloat16 for compare's
    argmax, and batch 2, filled with a second image, whose map is stored whole, every class's
    probability), computed by a real child; compared in a copy."""
    cache = ResultCache(shutil.copytree(softmax_cache.root, tmp_path / "soft"))
    record = cache.read_run(run_keys(cache)["cpu b2 r0"])
    assert record.kind == "softmax" and record.map_shape == (32, 32, 3)
    np.testing.assert_allclose(record.probabilities.sum(axis=-1), 1.0, atol=1e-5)
    result = segdiff_here(capsys, "compare", "--cache", cache.root)
    assert "class flips (argmax)" in result.stdout


def test_ref_labels_are_narrowed_by_image_and_check_refuses_nothing(
    demo, tmp_path, capsys, fake_engine
):
    model, images = demo
    cache = tmp_path / "two-images"
    for target in ("cell_00.png", "cell_01.png"):
        result = segdiff_here(
            capsys,
            "run",
            model,
            *images,
            "--target",
            target,
            "--cache",
            cache,
            "--config",
            "batch=1",
            "--config",
            "precision=mixed_bfloat16",
            "--repeats",
            "1",
        )
        assert result.returncode == 0, result.stderr
    ambiguous = segdiff_here(
        capsys,
        "export",
        "--cache",
        cache,
        "--ref",
        "cpu b1 r0",
        "--other",
        "cpu b1 bf16 r0",
        "--mask",
        tmp_path / "m.npy",
    )
    assert ambiguous.returncode == 2 and "is ambiguous" in ambiguous.stderr
    narrowed = segdiff_here(
        capsys,
        "export",
        "--cache",
        cache,
        "--image",
        "cell_01.png",
        "--ref",
        "cpu b1 r0",
        "--other",
        "cpu b1 bf16 r0",
        "--mask",
        tmp_path / "m.npy",
    )
    assert narrowed.returncode == 0, narrowed.stderr
    compared = json.loads(segdiff_here(capsys, "compare", "--cache", cache, "--json").stdout)
    assert sorted(study["image"] for study in compared) == ["cell_00.png", "cell_01.png"]
    lonely = tmp_path / "lonely"
    segdiff_here(
        capsys, "run", model, images[0], "--cache", lonely, "--config", "batch=1", "--repeats", "1"
    )
    nothing = segdiff_here(capsys, "check", "--cache", lonely)
    assert nothing.returncode == 2 and "found no run to compare" in nothing.stderr
    bad_bound = segdiff_here(capsys, "check", "--cache", cache, "--max-abs", "nan")
    assert bad_bound.returncode == 2 and "--max-abs" in bad_bound.stderr


def test_runs_that_differ_in_settings_never_look_alike(
    models, small_images, tmp_path, capsys, fake_engine
):
    """--color keep and --color gray runs of one model and image made two groups
    with the same title, two identical 'cpu b1 r0' rows in ls, and report --image could not
    tell them apart."""
    cache = tmp_path / "cache"
    for color in ("keep", "gray"):
        result = segdiff_here(
            capsys,
            "run", models / "tiny.keras", small_images[0], "--config", "batch=1",
            "--config", "batch=2", "--repeats", "1", "--color", color, "--cache", cache,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    listing = json.loads(segdiff_here(capsys, "ls", "--cache", cache, "--json").stdout)
    groups = {row["group"] for row in listing}
    assert len(groups) == 2 and len(listing) == 4
    table = segdiff_here(capsys, "ls", "--cache", cache).stdout
    assert "color gray" in table and "defaults" in table
    compared = segdiff_here(capsys, "compare", "--cache", cache).stdout
    assert "tiny.keras on small_0.png (color gray)" in compared
    assert "tiny.keras on small_0.png (default settings" in compared
    ambiguous = segdiff_here(
        capsys, "report", "--cache", cache, "--image", "small_0.png", "--json", tmp_path / "r.json"
    )
    assert ambiguous.returncode == 2
    assert "choose with --ref, --model, --image or --group" in ambiguous.stderr
    gray = next(row["group"] for row in listing if row["preprocessing"]["color"] == "gray")
    chosen = segdiff_here(
        capsys, "report", "--cache", cache, "--group", gray, "--json", tmp_path / "r.json"
    )
    assert chosen.returncode == 0, chosen.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["group"] == gray and report["settings"]["preprocessing"]["color"] == "gray"
    html = segdiff_here(
        capsys, "report", "--cache", cache, "--group", gray, "--html", tmp_path / "r.html"
    )
    assert html.returncode == 0, html.stderr
    assert f"Model settings (group {gray}): " in (tmp_path / "r.html").read_text()
    # A configuration in two groups is ambiguous, said with the groups: never one picked.
    both = segdiff_here(capsys, "compare", "--cache", cache, "--ref", "cpu b1")
    assert both.returncode == 2 and "cpu b1: is in 2 groups:" in both.stderr
    assert f"group {gray}, color gray)" in both.stderr and both.stderr.rstrip().endswith(
        " — add --group ID"
    )
    # explain takes the model settings run does: the gray runs are served from the cache.
    explained = segdiff_here(
        capsys,
        "explain", models / "tiny.keras", small_images[0], "--from", "batch=1", "--to",
        "batch=2", "--color", "gray", "--repeats", "1", "--cache", cache, "--json",
    )  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    gray_keys = {row["key"] for row in listing if row["group"] == gray}
    assert set(json.loads(explained.stdout)["runs"].values()) == gray_keys
    assert len(json.loads(segdiff_here(capsys, "ls", "--cache", cache, "--json").stdout)) == 4
    # --ref means a run or a configuration in every command, sweep included.
    by_config = segdiff_here(
        capsys, "compare", "--cache", cache, "--group", gray, "--ref", "cpu b2", "--json"
    )
    assert json.loads(by_config.stdout)[0]["reference"] == "cpu b2 r0"
    mixed = segdiff_here(capsys, "sweep", "--cache", cache)
    assert mixed.returncode == 2 and f"group {gray} (small_0.png): model" in mixed.stderr
    assert "color gray" in mixed.stderr
    assert "choose one by the group of any of its images — add --group ID" in mixed.stderr
    swept = segdiff_here(
        capsys, "sweep", "--cache", cache, "--group", gray, "--ref", "cpu b2", "--json"
    )
    assert swept.returncode == 0, swept.stderr
    assert json.loads(swept.stdout)["reference"] == "cpu b2"
