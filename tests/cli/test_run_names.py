"""Every option that names a cached run takes what ``--ref`` takes (a run's id prefix or
label, or a configuration's label), among the runs the command's model, image and group
leave; and a hint names only an option the command has."""

import json

import numpy as np

from tests.conftest import segdiff_here


def _run(capsys, model, image, cache, *batches_and_options):
    batches = [item for item in batches_and_options if isinstance(item, int)]
    options = [item for item in batches_and_options if isinstance(item, str)]
    configs = [arg for batch in batches for arg in ("--config", f"batch={batch}")]
    result = segdiff_here(
        capsys, "run", model, image, *configs, "--repeats", "2", "--cache", cache, *options
    )
    assert result.returncode == 0, result.stderr


def test_export_other_and_bundle_take_a_configurations_label(
    models, small_images, tmp_path, capsys, fake_engine
):
    """``export --ref "cpu b1" --other "cpu b2"``: --other said "names no run in the cache"
    while --ref, explain's --to and the API took the configuration's label."""
    cache = tmp_path / "cache"
    _run(capsys, models / "tiny.keras", small_images[0], cache, 1, 2)
    exported = segdiff_here(
        capsys, "export", "--cache", cache, "--ref", "cpu b1", "--other", "cpu b2",
        "--mask", tmp_path / "m.npy",
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert "of cpu b2 r0 against cpu b1 r0" in exported.stdout
    assert np.load(tmp_path / "m.npy").dtype == bool
    listing = json.loads(segdiff_here(capsys, "ls", "--cache", cache, "--json").stdout)
    b2 = sorted(row["key"] for row in listing if row["label"].startswith("cpu b2 "))
    bundled = segdiff_here(
        capsys, "bundle", tmp_path / "b2.h5", "cpu b2", "--cache", cache, "--json"
    )
    assert bundled.returncode == 0, bundled.stderr
    assert sorted(json.loads(bundled.stdout)["runs"]) == b2 and len(b2) == 2
    explained = segdiff_here(
        capsys, "explain", "--cache", cache, "--from", "cpu b1", "--to", "cpu b2", "--json"
    )
    assert explained.returncode == 0, explained.stderr


def test_layers_names_runs_among_its_models_own_and_takes_the_group_it_hints(
    models, small_images, tmp_path, capsys, fake_engine
):
    """``layers ship_unet.keras … --from "cpu b1 r0"`` listed another model's runs
    as candidates, then hinted --group, which layers refused."""
    cache = tmp_path / "cache"
    _run(capsys, models / "tiny.keras", small_images[0], cache, 1, 2)
    _run(capsys, models / "nested.keras", small_images[0], cache, 1, 3)
    tiny = [models / "tiny.keras", small_images[0], "--cache", cache]
    # cpu b3 is nested.keras's only: it names no run of tiny.keras, whose runs are listed.
    missing = segdiff_here(capsys, "layers", *tiny, "--from", "cpu b1 r0", "--to", "cpu b3 r0")
    assert missing.returncode == 2
    assert missing.stderr.startswith("segdiff: cpu b3 r0: names no run in the cache (runs: ")
    assert "tiny.keras" in missing.stderr and "nested.keras" not in missing.stderr
    listing = json.loads(segdiff_here(capsys, "ls", "--cache", cache, "--json").stdout)
    group = next(row["group"] for row in listing if row["model"] == "tiny.keras")
    grouped = segdiff_here(
        capsys, "layers", *tiny, "--group", group, "--from", "cpu b1 r0", "--to", "cpu b3 r0"
    )
    assert grouped.returncode == 2 and "names no run in the cache" in grouped.stderr
    # 'cpu b1 r0' is a run of tiny.keras under --color gray too: the runs of the settings the
    # command gives (those it probes with) are looked in first.
    _run(capsys, models / "tiny.keras", small_images[0], cache, 1, 4, "--color", "gray")
    settled = segdiff_here(capsys, "layers", *tiny, "--from", "cpu b1 r0", "--to", "cpu b3 r0")
    assert settled.stderr.startswith("segdiff: cpu b3 r0: names no run in the cache (runs: ")
    assert "nested.keras" not in settled.stderr
    elsewhere = segdiff_here(capsys, "layers", *tiny, "--from", "cpu b1 r0", "--to", "cpu b4 r0")
    assert elsewhere.stderr.startswith(  # b4 is gray's
        "segdiff: cpu b4 r0: is not comparable with cpu b1 r0 (another model, image, "
        "preprocessing or map shape)"
    )
    # Across the two images named a label is two runs: the hint names --group, which layers
    # takes.
    _run(capsys, models / "tiny.keras", small_images[1], cache, 1, 2)
    two = [models / "tiny.keras", *small_images[:2], "--cache", cache]
    both = segdiff_here(capsys, "layers", *two, "--from", "cpu b1 r0", "--to", "cpu b2 r0")
    assert both.returncode == 2 and "cpu b1 r0: is ambiguous: " in both.stderr
    assert both.stderr.rstrip().endswith(" — add --group ID") and ") (" not in both.stderr
    # --target names the image by its name, path or stem, as planning reads it (the review:
    # a path or a stem matched no run): the label is then one run, that image's.
    images = [models / "tiny.keras", small_images[0], small_images[1], "--cache", cache]
    for target in (str(small_images[1]), small_images[1].stem, small_images[1].name):
        named = segdiff_here(
            capsys, "layers", *images, "--target", target, "--from", "cpu b1 r0", "--to",
            "cpu b7 r0",
        )  # fmt: skip
        assert named.returncode == 2
        assert named.stderr.startswith("segdiff: cpu b7 r0: names no run in the cache (runs: ")
        assert small_images[0].name not in named.stderr.split("(runs: ")[1]


def test_layers_names_runs_among_those_of_the_image_it_is_given(
    models, small_images, tmp_path, capsys, fake_engine
):
    """``layers MODEL astronaut.png --from "cpu b1"`` listed the runs of the other
    images as ambiguous and asked for --group: an image named on the command line narrows the
    candidates to its runs."""
    cache = tmp_path / "cache"
    for image in small_images[:3]:
        _run(capsys, models / "tiny.keras", image, cache, 1, 2)
    one = [models / "tiny.keras", small_images[1], "--cache", cache]
    missing = segdiff_here(capsys, "layers", *one, "--from", "cpu b1", "--to", "cpu b7")
    assert missing.stderr.startswith("segdiff: cpu b7: names no run in the cache (runs: ")
    listed = missing.stderr.split("(runs: ")[1]
    assert small_images[1].name in listed
    assert small_images[0].name not in listed and small_images[2].name not in listed
    chosen = segdiff_here(capsys, "layers", *one, "--from", "cpu b1", "--to", "cpu b2")
    assert "ambiguous" not in chosen.stderr and "--group" not in chosen.stderr
    # Past the choice, to the probe of that image's run (which the fake engine cannot make).
    assert "segdiff: cpu b1 r0: its probe failed" in chosen.stderr
    absent = segdiff_here(capsys, "layers", models / "tiny.keras", small_images[3], "--cache",
                          cache, "--from", "cpu b1", "--to", "cpu b2")  # fmt: skip
    assert absent.returncode == 2
    assert absent.stderr == (
        f"segdiff: {models / 'tiny.keras'}: has no run in the cache on {small_images[3].name} "
        "(see 'segdiff ls')\n"
    )
