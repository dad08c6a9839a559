"""The segdiff command line: cache hits, listing, bundles, devices, exit codes. Its ``main`` runs
in this process (``segdiff_here``) where a subprocess would prove nothing more, and the fake
engine computes the runs where what the command does with them is the point; the engine's own
runs of these models are tests/engine/test_formats.py's."""

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

import segdiff_gui.runner.child as child_module
from segdiff_gui.cli.main import main
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.provenance import Provenance
from tests.conftest import segdiff, segdiff_here

pytestmark = pytest.mark.slow


def test_second_identical_run_is_served_from_cache_without_tensorflow(
    models, small_images, cache, capsys, monkeypatch, fake_engine
):
    args = [
        "run",
        str(models / "tiny.keras"),
        *map(str, small_images),
        "--cache",
        str(cache.root),
        "--config",
        "batch=1",
        "--config",
        "batch=4",
        "--json",
    ]
    first = segdiff_here(capsys, *args)
    assert first.returncode == 0, first.stderr
    assert {r["status"] for r in json.loads(first.stdout)["runs"]} == {"finished"}

    def no_children(*_args, **_kwargs):
        raise AssertionError("a cache hit must not start an engine child")

    monkeypatch.setattr(child_module.ChildProcess, "__init__", no_children)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in second["runs"]] == ["cached"] * 4
    assert "tensorflow" not in sys.modules and "keras" not in sys.modules

    # A hit in a fresh process imports only what it needs: no progress bar to draw, no sweep,
    # no device probe (each a few milliseconds of a hit that takes a few tenths).
    script = (
        "import sys; from segdiff_gui.cli.main import main; main(sys.argv[1:]); "
        "print([m for m in ('rich.progress', 'socket', 'segdiff_gui.cli.sweep_view', "
        "'tensorflow') if m in sys.modules], file=sys.stderr)"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=True
    )
    assert fresh.stderr.strip().splitlines()[-1] == "[]"


def test_ls_lists_runs_with_labels_and_provenance(models, small_images, cache, capsys, fake_engine):
    segdiff_here(
        capsys,
        "run",
        models / "tiny.keras",
        small_images[1],
        "--cache",
        cache.root,
        "--config",
        "batch=1,xla=on",
        "--repeats",
        "1",
    )
    listing = segdiff_here(capsys, "ls", "--cache", cache.root)
    assert listing.returncode == 0
    assert "cpu b1 xla r0" in listing.stdout and "tiny.keras" in listing.stdout
    (entry,) = json.loads(segdiff_here(capsys, "ls", "--cache", cache.root, "--json").stdout)
    assert entry["label"] == "cpu b1 xla r0" and entry["image"] == "small_1.png"
    assert entry["provenance"]["xla"] is True and entry["provenance"]["device"] == "cpu:0"


def test_bundle_then_merge_moves_runs_bit_exactly(
    models, small_images, tmp_path, capsys, fake_engine
):
    server, laptop = ResultCache(tmp_path / "server"), ResultCache(tmp_path / "laptop")
    segdiff_here(
        capsys,
        "run",
        models / "tiny.keras",
        *small_images,
        "--cache",
        server.root,
        "--config",
        "batch=1",
        "--config",
        "batch=4",
    )
    bundle = tmp_path / "from-server.h5"
    made = segdiff_here(capsys, "bundle", bundle, "cpu b4 r1", "--cache", server.root)
    assert made.returncode == 0, made.stderr
    assert "wrote 1 run to" in made.stdout
    unknown = segdiff_here(capsys, "bundle", tmp_path / "x.h5", "zzzz", "--cache", server.root)
    assert unknown.returncode == 2 and "zzzz: names no run in the cache" in unknown.stderr
    into_folder = segdiff_here(capsys, "bundle", tmp_path, "--cache", server.root)
    assert into_folder.returncode == 2 and "is a folder" in into_folder.stderr
    (tmp_path / "notes.txt").write_text("mine")
    onto_file = segdiff_here(capsys, "bundle", tmp_path / "notes.txt", "--cache", server.root)
    assert onto_file.returncode == 2 and "not overwriting it" in onto_file.stderr
    merged = segdiff_here(capsys, "merge", bundle, "--cache", laptop.root)
    assert merged.returncode == 0 and "1 added" in merged.stdout
    (key,) = laptop.keys()
    merged_run = laptop.read_run(key)
    provenance = merged_run.provenance.to_dict()
    assert provenance.pop("merged_from_bundle") == "from-server.h5"
    assert provenance.pop("merged_at")
    assert replace(merged_run, provenance=Provenance.from_dict(provenance)) == server.read_run(key)
    assert (
        laptop.read_run(key).probabilities.tobytes() == server.read_run(key).probabilities.tobytes()
    )
    assert laptop.read_image(laptop.read_run(key).target_hash) is not None
    listed = segdiff_here(capsys, "ls", "--cache", laptop.root)
    assert "(merged from from-server.h5)" in listed.stdout  # never taken for this machine's


def test_devices_reports_cpu_and_build(tmp_path, capsys, monkeypatch):
    # One probe child per runtime, with every GPU hidden (what is asserted holds with or
    # without a GPU); the text is then rendered from those same answers, in this process.
    hidden = segdiff("devices", "--json", "--cache", tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.returncode == 0, hidden.stderr
    probe = json.loads(hidden.stdout)
    assert any(d["name"] == "cpu" for d in probe["devices"])
    assert probe["facts"]["tf_version"].startswith("2.")
    assert "onednn_enabled" in probe["facts"]
    # Every installed runtime says what it sees, and where it sees no GPU, why.
    # LiteRT's four conversions share one engine, so one probe answers for them.
    assert set(probe["runtimes"]) == {
        "tensorflow", "jax", "torch", "litert", "onnxruntime", "openvino", "tf_keras"
    }  # fmt: skip
    for name, seen in probe["runtimes"].items():
        assert seen["facts"]["runtime"] == name
        if not any(d["type"] == "GPU" for d in seen["devices"]):
            assert seen["facts"]["gpu_absent"], name
    assert not probe["failed"]

    from segdiff_gui.cli.commands import devices as devices_command

    answers = probe["runtimes"]
    monkeypatch.setattr(devices_command, "probe_runtimes", lambda root, runtimes, fresh: answers)
    assert main(["devices", "--cache", str(tmp_path)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in said
    # No GPU for TensorFlow here: model.predict compiles without XLA, and runs do the same.
    assert "model.predict without XLA" in said
    assert "No GPU visible to LiteRT: its GPU delegate is built for Android and iOS" in said
    assert "No GPU visible to OpenVINO: segdiff runs it on its CPU plugin" in said
    # What OpenVINO's CPU plugin infers in when nobody asks depends on the CPU.
    default = answers["openvino"]["facts"]["openvino_default_precision"]
    assert default in ("f32", "bf16", "f16")
    assert f"inferring in {default} by default here (inference_precision=f32|bf16)" in said
    # Keras 2: tf_keras's version, on this TensorFlow.
    facts = answers["tf_keras"]["facts"]
    assert f"tf_keras {facts['runtime_version']} (Keras 2 on TensorFlow {facts['tf_version']}" in (
        said
    )
    assert "No GPU visible to tf_keras" in said
    assert "Not installed" not in said


def test_usage_errors_exit_2_with_one_line(tmp_path, capsys):
    result = segdiff_here(
        capsys, "run", tmp_path / "missing.keras", tmp_path, "--config", "batch=0"
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    bad_spec = segdiff_here(capsys, "run", "m.keras", "i.png", "--config", "warp=9")
    assert bad_spec.returncode == 2
    assert "unknown config key 'warp'" in bad_spec.stderr
    assert segdiff_here(capsys, "frobnicate").returncode == 2


def test_segdiff_cache_variable_chooses_the_cache(
    models, small_images, tmp_path, capsys, fake_engine, monkeypatch
):
    root = tmp_path / "from-env"
    monkeypatch.setenv("SEGDIFF_CACHE", str(root))
    result = segdiff_here(
        capsys,
        "run",
        models / "tiny.keras",
        small_images[0],
        "--config",
        "batch=1",
        "--repeats",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert f"cache {root}" in result.stdout
    assert len(ResultCache(root).keys()) == 1


def test_default_matrix_is_batch_1_and_64_on_every_device_twice(
    models, small_images, cache, capsys, fake_engine
):
    result = segdiff_here(
        capsys, "run", models / "tiny.keras", *small_images, "--cache", cache.root, "--json"
    )
    assert result.returncode == 0, result.stderr
    labels = sorted(r["label"] for r in json.loads(result.stdout)["runs"])
    assert labels == ["cpu b1 r0", "cpu b1 r1", "cpu b64 r0", "cpu b64 r1"]  # no GPU here


def test_demo_shows_how_batch_64_differs_from_batch_1(demo_cache, capsys):
    # The demo's real runs (its first repeats), made once for every test that reads them.
    result = segdiff_here(capsys, "demo", "--cache", demo_cache.root, "--repeats", "1")
    assert result.returncode == 0, result.stderr
    assert "cell_00.png: every run against cpu b1 r0" in result.stdout
    for label in ("cpu b64 r0", "cpu b1 threads1 r0", "cpu b1 xla r0", "cpu b1 bf16 r0"):
        assert label in result.stdout
    assert "cpu b64 r0 vs cpu b1 r0: " in result.stdout
    comparisons = json.loads(
        segdiff_here(capsys, "demo", "--cache", demo_cache.root, "--repeats", "1", "--json").stdout
    )["comparisons"]
    b64 = next(row for row in comparisons if row["label"] == "cpu b64 r0")
    sentence = "bitwise equal." if b64["bitwise_equal"] else f"{b64['differing_pixels']:,} of"
    assert sentence in result.stdout


def test_runs_whose_batches_held_other_images_are_never_repeats(
    models, small_images, tmp_path, capsys, fake_engine
):
    """A cache of 6 images and one of 4, both ``cpu b8``, merged. Their batches
    differ, so they are two configurations with two repeats each, named apart, never one
    configuration 'deterministic over 4 repeats'."""
    more = []
    for index in (4, 5):
        extra = tmp_path / f"small_{index}.png"
        pixels = np.random.default_rng(index).integers(0, 256, (32, 32), dtype=np.uint8)
        Image.fromarray(pixels).save(extra)
        more.append(extra)
    six, four = ResultCache(tmp_path / "six"), ResultCache(tmp_path / "four")
    for cache, images in ((six, [*small_images, *more]), (four, small_images)):
        ran = segdiff_here(capsys, "run", models / "tiny.keras", *images, "--cache", cache.root,
                      "--config", "batch=8", "--repeats", "2")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    bundle = tmp_path / "four.h5"
    assert segdiff_here(capsys, "bundle", bundle, "--cache", four.root).returncode == 0
    merged = segdiff_here(capsys, "merge", bundle, "--cache", six.root)
    assert merged.returncode == 0 and "2 added" in merged.stdout, merged.stdout + merged.stderr
    compared = segdiff_here(capsys, "compare", "--cache", six.root, "--json")
    assert compared.returncode == 0, compared.stderr
    (report,) = json.loads(compared.stdout)
    determinism = report["determinism"]
    assert len(determinism) == 2, determinism
    assert all("over 2 repeats" in str(v) for v in determinism.values()), determinism
    names = sorted(determinism)
    assert names[0].startswith("cpu b8 ") and names[0] != names[1]
    assert {name.split()[-1].split("#")[0] for name in names} == {"6img", "4img"}
    listed = segdiff_here(capsys, "ls", "--cache", six.root)
    assert "6img#" in listed.stdout and "4img#" in listed.stdout
