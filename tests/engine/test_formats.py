"""Real inference in engine children on every model format, and the clear errors for models
segdiff must refuse. All through the real ``segdiff`` command line: its ``main``, in this
process (``segdiff_here``: its engine children are real ones), but for ``--debug``, which
raises in ``main`` and is printed by the process."""

import json
import shutil
import subprocess
import sys

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
        "(colour conversion) — add --color gray"
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


def _rgb(path, height, width, seed):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    return path


def test_a_free_size_unet_refuses_a_size_it_cannot_take_in_one_line_then_resizes_to_one(
    models, tmp_path, cache, capsys
):
    """A U-Net of free input size given an image whose side its pooling and
    upsampling do not give back (33 rows: pooled to 16, upsampled to 32, joined with 33) failed
    with TensorFlow's raw concat error, cut off, naming no image. It is one line naming the
    image and its size, the model's reason, the sizes it takes, and bilinear resizing, which
    then resizes the image to the nearest of them."""
    odd = _rgb(tmp_path / "odd.png", 33, 34, 1)
    model = models / "free_unet_tfkeras.h5"
    result = run_once(capsys, model, odd, cache=cache)
    assert result.returncode == 2
    assert result.stderr == (
        f"segdiff: {odd}: is 33×34×3, a size this model cannot take (its Concatenate layer: "
        "Dimension 1 in both shapes must be equal, but are 33 and 32); it takes 34×34 or "
        "32×34 (sides a multiple of 2): bilinear resizing resizes it to 34×34 "
        "— add --resize bilinear\n"
    )
    resized, data = run_json(
        capsys, model, odd, "--config", "batch=1", "--resize", "bilinear", cache=cache
    )
    assert resized.returncode == 0, resized.stderr
    record = cache.read_run(data["runs"][0]["key"])
    assert record.probabilities.shape == (34, 34)
    assert record.provenance.to_dict()["input_batch_shape"] == [1, 34, 34, 3]


def test_a_size_a_free_size_unet_cannot_take_offers_no_resizing_to_your_own_function(
    models, tmp_path, cache, capsys
):
    """Bilinear resizing does not reach an input the user's own function makes: the sizes the
    model takes are said, and no fix that would be refused the same way again; a batch of a
    target of such a size says it before the batch's other sizes."""
    odd = _rgb(tmp_path / "odd.png", 33, 34, 1)
    other = _rgb(tmp_path / "other.png", 24, 24, 3)
    code = tmp_path / "prepare.py"
    code.write_text("def prepare(image):\n    return image / 255\n")
    model = models / "free_unet_tfkeras.h5"
    function = ("--preprocess", f"{code}:prepare", "--trust-preprocess")
    result = run_once(capsys, model, odd, *function, cache=cache)
    assert result.returncode == 2
    assert result.stderr.endswith(
        "are 33 and 32); it takes 34×34 or 32×34 (sides a multiple of 2)\n"
    ), result.stderr
    args = (model, odd, other, "--target", "odd.png", "--config", "batch=2", "--repeats", "1")
    batch = segdiff_here(capsys, "run", *args, "--cache", cache.root)
    assert batch.returncode == 2
    assert batch.stderr.startswith(f"segdiff: {odd}: is 33×34×3, a size this model cannot take")
    assert batch.stderr.endswith("resizes it to 34×34 — add --resize bilinear\n")


def test_a_free_size_batch_of_other_sizes_is_resized_to_its_targets_size_on_request(
    models, tmp_path, cache, capsys
):
    """A free-size model's batch of a 32×32 target and a 24×24 image was refused
    with "add --resize bilinear", and with it refused again, identically: a loop. Bilinear
    resizing now resizes the rest of the batch to the target's size (the batch context stays
    the set's images), and the refusal offers it."""
    target = _rgb(tmp_path / "target.png", 32, 32, 2)
    other = _rgb(tmp_path / "other.png", 24, 24, 3)
    model = models / "free_unet_tfkeras.h5"
    args = (model, target, other, "--target", "target.png", "--config", "batch=2")
    resized, data = run_json(capsys, *args, "--resize", "bilinear", cache=cache)
    assert resized.returncode == 0, resized.stderr
    (run,) = data["runs"]
    record = cache.read_run(run["key"])
    assert record.batch_names == ["target.png", "other.png"]
    assert record.probabilities.shape == (32, 32)
    assert record.provenance.to_dict()["input_batch_shape"] == [2, 32, 32, 3]
    # Without it, the refusal offers it.
    refused = segdiff_here(capsys, "run", *args, "--repeats", "1", "--cache", cache.root)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"segdiff: {other}: is 24×24×3 but the target is 32×32×3; a batch needs equal sizes "
        "(bilinear resizing to the target's, or a batch context of copies) "
        "— add --resize bilinear\n"
    )


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
    """Keras's reason is said, not "Exception encountered when calling Lambda.call()" and
    nothing else; and --debug shows the child's log the docs promise, not only the parent's
    traceback."""
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
    assert "apply a sigmoid to them (activation) — add --activation sigmoid" in result.stderr
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
    # A softmax over the one channel was taken, and a map of 1.0 everywhere stored.
    runs = len(cache.keys())
    softmax = run_once(
        capsys, models / "logits.keras", small_images[0], "--activation", "softmax", cache=cache
    )
    assert softmax.returncode == 2
    assert softmax.stderr == (
        f"segdiff: {models / 'logits.keras'}: output 'logits' has one channel, over which a "
        "softmax is 1 everywhere; a one-channel map's logits take a sigmoid (activation) — add "
        "--activation sigmoid\n"
    )
    assert len(cache.keys()) == runs


def test_several_outputs_are_chosen_by_name_or_index(models, small_images, cache, capsys):
    result = run_once(capsys, models / "two_outputs.keras", small_images[0], cache=cache)
    assert result.returncode == 2
    assert (
        "model has 2 outputs (mask, edges); choose one (output: a name or an index) — add "
        "--output NAME|INDEX"
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


def test_a_savedmodel_in_a_matrix_skips_what_it_cannot_take_and_runs_the_rest(
    formats, models, small_images, tmp_path, capsys, monkeypatch
):
    """A precision policy or the TF32 emulation beside a configuration the
    SavedModel takes no longer cancels the matrix: each is said in one line, and the batch-1
    run (the real TensorFlow child's, in the formats' cache) is served."""
    first, filled = formats["tiny_savedmodel"]
    assert first.returncode == 0, first.stderr
    cache = ResultCache(shutil.copytree(filled.root, tmp_path / "cache"))
    _no_children(monkeypatch, "what can run is cached; what cannot is said before any child")
    model = models / "tiny_savedmodel"
    result, data = run_json(
        capsys, model, *small_images, "--config", "batch=1", "--config", "precision=float64",
        "--config", "emulate=tf32", cache=cache,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [run["status"] for run in data["runs"]] == ["cached"]
    assert [skip["label"] for skip in data["skipped"]] == ["cpu b1 fp64", "cpu b1 emu-tf32"]
    assert result.stderr.splitlines() == [
        f"segdiff: skipped cpu b1 fp64: {model}: precision override needs a Keras model "
        "(.keras or .h5); a SavedModel's graph has fixed dtypes",
        f"segdiff: skipped cpu b1 emu-tf32: {model}: emulate=tf32 rounds a Keras model's "
        "convolutions and matrix multiplies; a SavedModel's graph calls TensorFlow's kernels "
        "itself (a .keras or .h5 model)",
    ]


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
        "already holds probabilities; apply no sigmoid to them (activation) — add --activation none"
    ) in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_mean_per_channel_mismatch_is_one_line(models, small_images, cache, capsys):
    result = run_once(
        capsys, models / "tiny.keras", small_images[0], "--mean", "0.5,0.5,0.5", cache=cache
    )
    assert result.returncode == 2
    assert (
        "the mean has 3 values but the model input has 1 channel(s); give 1 — add --mean"
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


_TRACE_FAILS = """
from segdiff_gui.engine.input_sizes import SizeFit

class Untraceable:  # a layer with no symbolic form fails the trace at every size
    def __call__(self, batch, training=False):
        raise NotImplementedError("no symbolic form")

fit = SizeFit(Untraceable())
print(fit.refused(33, 34, 3), fit.reason(33, 34, 3) != "")
"""


def test_a_trace_that_fails_at_every_size_leaves_the_forward_pass_to_decide():
    """The review: a free-size model whose shapes-only trace fails at every size (a layer
    without a symbolic form) was refused as "a size this model cannot take" before its
    forward pass ran, and any forward failure (out of memory, say) was said that way too.
    Where no nearby size traces either, the trace, not the size, is what fails: no refusal."""
    done = subprocess.run(
        [sys.executable, "-c", _TRACE_FAILS], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "True"]
