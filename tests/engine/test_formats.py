"""Real inference in engine children on every model format, and the clear errors for models
segdiff must refuse. All through the real ``segdiff`` command line: its ``main``, in this
process (``segdiff_here``: its engine children are real ones), but for ``--debug``, which
raises in ``main`` and is printed by the process."""

import json
import shutil

import numpy as np
import pytest
from PIL import Image

import segdiff_gui.runner.child as child_module
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff, segdiff_here

pytestmark = pytest.mark.slow


def run_json(capsys, *args, cache):
    trust = ["--trust-model"] if any("savedmodel" in str(arg) for arg in args) else []
    result = segdiff_here(
        capsys, "run", *args, *trust, "--cache", cache.root, "--json", "--repeats", "1"
    )
    return result, (json.loads(result.stdout) if result.returncode in (0, 1) else None)


def run_once(capsys, model, image, *options, cache):
    """One batch-1 run of ``model`` on ``image`` through the real command line."""
    return segdiff_here(
        capsys,
        "run",
        model,
        image,
        "--config",
        "batch=1",
        "--repeats",
        "1",
        *options,
        "--cache",
        cache.root,
    )


FORMATS = ("tiny.keras", "tiny_tfkeras.h5", "tiny_savedmodel")


@pytest.fixture(scope="module")
def formats(models, small_images, tmp_path_factory):
    """The same weights in each format, run at batch 1 on the small images (a child each),
    each into a cache of its own: its ``segdiff run --json`` and the cache, by format."""
    base = tmp_path_factory.mktemp("formats")
    done = {}
    for name in FORMATS:
        trust = ["--trust-model"] if "savedmodel" in name else []
        cache = ResultCache(base / name)
        result = segdiff(
            "run", models / name, *small_images, "--config", "batch=1", *trust,
            "--cache", cache.root, "--json", "--repeats", "1",
        )  # fmt: skip
        done[name] = (result, cache)
    return done


def test_every_format_gives_the_same_map(formats):
    maps = {}
    for name, (result, cache) in formats.items():
        assert result.returncode == 0, result.stderr
        (run,) = json.loads(result.stdout)["runs"]
        assert run["status"] == "finished" and run["device"] == "cpu:0"
        record = cache.read_run(run["key"])
        assert record.kind == "sigmoid" and record.map_shape == (32, 32)
        assert record.provenance.to_dict()["model_format"] in ("keras", "h5", "savedmodel")
        maps[name] = record.probabilities
    # Same weights in three containers: the maps agree to float32 rounding.
    np.testing.assert_allclose(maps["tiny.keras"], maps["tiny_tfkeras.h5"], atol=1e-6)
    np.testing.assert_allclose(maps["tiny.keras"], maps["tiny_savedmodel"], atol=1e-6)


def test_lambda_model_is_refused_without_trust_and_runs_with_it(
    models, small_images, cache, capsys
):
    refused = run_once(capsys, models / "lambda.keras", small_images[0], cache=cache)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "lambda.keras: contains Python code" in refused.stderr
    assert "--trust-model" in refused.stderr
    trusted = run_once(
        capsys,
        models / "lambda.keras",
        small_images[0],
        "--repeats",
        "1",
        "--trust-model",
        cache=cache,
    )
    assert trusted.returncode == 0, trusted.stderr


def test_corrupt_model_is_one_clear_line(small_images, cache, tmp_path, capsys):
    import zipfile

    broken = tmp_path / "broken.keras"  # a zip archive, so only Keras itself can tell
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("config.json", "{ not json")
    result = segdiff_here(
        capsys, "run", broken, small_images[0], "--config", "batch=1", "--cache", cache.root
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"segdiff: {broken}: cannot be loaded as a Keras model")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_wrong_channel_image_names_the_file_and_both_shapes(models, tmp_path, cache, capsys):
    rgb = tmp_path / "colour.png"
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(rgb)
    result = segdiff_here(
        capsys, "run", models / "tiny.keras", rgb, "--config", "batch=1", "--cache", cache.root
    )
    assert result.returncode == 2
    assert (
        f"{rgb}: model expects 1 channel(s), image has 3; it needs grayscale input "
        "(colour conversion) (add --color gray)"
    ) in result.stderr
    converted = run_once(
        capsys, models / "tiny.keras", rgb, "--repeats", "1", "--color", "gray", cache=cache
    )
    assert converted.returncode == 0, converted.stderr


def test_size_mismatch_is_refused_then_resized_on_request(models, tmp_path, cache, capsys):
    big = tmp_path / "big.png"
    Image.fromarray(np.zeros((40, 48), dtype=np.uint8)).save(big)
    result = segdiff_here(
        capsys, "run", models / "tiny.keras", big, "--config", "batch=1", "--cache", cache.root
    )
    assert result.returncode == 2
    assert "big.png: image is 40×48×1 but the model expects 32×32×1" in result.stderr
    resized = run_once(
        capsys, models / "tiny.keras", big, "--repeats", "1", "--resize", "bilinear", cache=cache
    )
    assert resized.returncode == 0, resized.stderr


def test_non_image_file_is_refused_before_any_child(models, tmp_path, cache, capsys):
    text = tmp_path / "notes.tif"
    text.write_text("not an image")
    result = segdiff_here(
        capsys, "run", models / "tiny.keras", text, "--cache", cache.root, "--config", "batch=1"
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"segdiff: {text}: not a readable image (PNG, JPEG, TIFF or NPY expected)"
    )


def test_a_trusted_lambda_that_cannot_be_built_says_kerass_reason_and_debug_shows_the_child(
    models, small_images, cache, capsys
):
    """The trial: "Exception encountered when calling Lambda.call()" and nothing else; and
    --debug showed only the parent's traceback, not the child's log README promises."""
    result = run_once(
        capsys, models / "broken_lambda.keras", small_images[0], "--trust-model", cache=cache
    )
    assert result.returncode == 2
    assert "could not automatically infer the shape of the Lambda's output" in result.stderr
    assert "(in Lambda.call())" in result.stderr and result.stderr.count("\n") == 1
    debug = segdiff(  # in a process of its own: --debug lets the error through main
        "run", models / "broken_lambda.keras", small_images[0], "--config", "batch=1",
        "--repeats", "1", "--trust-model", "--debug", "--cache", cache.root,
    )  # fmt: skip
    assert "segdiff_gui/engine/models.py" in debug.stderr  # the child's own traceback
    assert "keras" in debug.stderr and "lambda_layer" in debug.stderr


def test_logits_need_an_activation(models, small_images, cache, capsys):
    result = run_once(capsys, models / "logits.keras", small_images[0], cache=cache)
    assert result.returncode == 2
    assert "is not a probability map" in result.stderr
    assert "apply a sigmoid to them (activation) (add --activation sigmoid)" in result.stderr
    fixed, data = run_json(
        capsys,
        models / "logits.keras",
        small_images[0],
        "--config",
        "batch=1",
        "--activation",
        "sigmoid",
        cache=cache,
    )
    assert fixed.returncode == 0, fixed.stderr
    values = cache.read_run(data["runs"][0]["key"]).probabilities
    assert values.min() >= 0.0 and values.max() <= 1.0


def test_several_outputs_are_chosen_by_name_or_index(models, small_images, cache, capsys):
    result = run_once(capsys, models / "two_outputs.keras", small_images[0], cache=cache)
    assert result.returncode == 2
    assert (
        "model has 2 outputs (mask, edges); choose one (output: a name or an index) (add "
        "--output NAME|INDEX)"
    ) in result.stderr
    by_name, named = run_json(
        capsys,
        models / "two_outputs.keras",
        small_images[0],
        "--config",
        "batch=1",
        "--output",
        "edges",
        cache=cache,
    )
    by_index, indexed = run_json(
        capsys,
        models / "two_outputs.keras",
        small_images[0],
        "--config",
        "batch=1",
        "--output",
        "1",
        cache=cache,
    )
    assert by_name.returncode == by_index.returncode == 0, by_name.stderr + by_index.stderr
    first = cache.read_run(named["runs"][0]["key"])
    second = cache.read_run(indexed["runs"][0]["key"])
    assert first.output_name == second.output_name == "edges"
    assert first.probabilities.tobytes() == second.probabilities.tobytes()


def _no_children(monkeypatch, why: str) -> None:
    def refuse(*_args, **_kwargs):
        raise AssertionError(why)

    monkeypatch.setattr(child_module.ChildProcess, "__init__", refuse)


def test_savedmodel_refuses_a_precision_override_before_any_child(
    models, small_images, cache, capsys, monkeypatch
):
    """A SavedModel's graph has its own dtypes: the planner says so in one line, without a
    TensorFlow child to be told."""
    _no_children(monkeypatch, "a SavedModel's precision is refused before any engine child")
    model = models / "tiny_savedmodel"
    result, _ = run_json(
        capsys, model, small_images[0], "--config", "batch=1,precision=mixed_bfloat16",
        cache=cache,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"segdiff: {model}: precision override needs a Keras model (.keras or .h5); a "
        "SavedModel's graph has fixed dtypes\n"
    )


def test_copied_savedmodel_folder_hits_the_same_cache_entry(
    formats, models, small_images, tmp_path, capsys
):
    """A copy of the SavedModel folder elsewhere is the same model: its runs are the
    original's, served from the cache (a copy of the one the original's run filled)."""
    first, filled = formats["tiny_savedmodel"]
    assert first.returncode == 0, first.stderr
    cache = ResultCache(shutil.copytree(filled.root, tmp_path / "cache"))
    copy = tmp_path / "copy_of_savedmodel"
    shutil.copytree(models / "tiny_savedmodel", copy)
    second, data = run_json(capsys, copy, *small_images, "--config", "batch=1", cache=cache)
    assert second.returncode == 0, second.stderr
    assert data["runs"][0]["status"] == "cached"


def test_savedmodel_needs_trust_like_keras_safe_mode(models, small_images, cache, capsys):
    result = run_once(capsys, models / "tiny_savedmodel", small_images[0], cache=cache)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "is a TensorFlow SavedModel" in result.stderr and "--trust-model" in result.stderr


def test_an_activation_on_probabilities_is_refused(models, small_images, cache, capsys):
    result = run_once(
        capsys, models / "tiny.keras", small_images[0], "--activation", "sigmoid", cache=cache
    )
    assert result.returncode == 2, result.stderr
    assert (
        "already holds probabilities; apply no sigmoid to them (activation) (add --activation none)"
    ) in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_mean_per_channel_mismatch_is_one_line(models, small_images, cache, capsys):
    result = run_once(
        capsys, models / "tiny.keras", small_images[0], "--mean", "0.5,0.5,0.5", cache=cache
    )
    assert result.returncode == 2
    assert (
        "the mean has 3 values but the model input has 1 channel(s); give 1 (add --mean"
        in result.stderr
    )


def test_garbage_model_files_are_refused_without_starting_tensorflow(
    tmp_path, small_images, capsys, monkeypatch
):
    _no_children(monkeypatch, "a file that is no model must be refused before any engine child")
    for name in ("garbage.keras", "garbage.h5", "notes.txt"):
        (tmp_path / name).write_bytes(b"not a model at all")
        result = segdiff_here(
            capsys,
            "run",
            tmp_path / name,
            small_images[0],
            "--cache",
            tmp_path / "c",
            "--config",
            "batch=1",
        )
        assert result.returncode == 2
        assert result.stderr.startswith(f"segdiff: {tmp_path / name}: ")
