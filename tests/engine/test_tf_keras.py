"""Keras 2 as a runtime: ``runtime=tf_keras`` runs a ``.h5`` as a Keras 2 user's
script does (``TF_USE_LEGACY_KERAS=1``, ``tf.keras.models.load_model``, ``model.predict``), bit
for bit; every knob it takes is honoured or read back; ``segdiff reproduce`` names it where
Keras 3 computes the same file otherwise (batch normalisation: tests/fixtures_models.py); and
an untrusted ``.h5`` whose Lambda is code is refused before tf_keras reads it."""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff
from tests.engine.knob_cells import assert_honoured

pytestmark = pytest.mark.slow

MODEL = "bn_unet_tfkeras.h5"

# Every knob tf_keras takes (tests/core/test_knob_cells.py reads these), and Keras 3's
# defaults on the same file: four children, the process-level knobs all changed in one.
SPECS = {
    "tf_keras": "runtime=tf_keras",
    "b4": "runtime=tf_keras,batch=4",
    "xla": "runtime=tf_keras,xla=on",
    "xla off": "runtime=tf_keras,xla=off",
    "bf16": "runtime=tf_keras,precision=bf16",
    "fp16": "runtime=tf_keras,precision=fp16",
    "keep": "runtime=tf_keras,precision=bf16,keep_float32=foreground",
    "knobs": "runtime=tf_keras,tf32=off,threads=1,determinism=on,onednn=off",
    "onednn": "runtime=tf_keras,onednn=on",
}
KERAS3 = "batch=1"

# A Keras 2 user's script, as the user ran it: TF_USE_LEGACY_KERAS=1 makes tf.keras
# tf_keras; nothing else is set. The first image alone, and all four in one predict call
# (model.predict's batch of 32 holds them all).
PLAIN = """
import os, sys
import numpy as np
from PIL import Image
import tensorflow as tf

assert os.environ["TF_USE_LEGACY_KERAS"] == "1"
model_path, out, *images = sys.argv[1:]
model = tf.keras.models.load_model(model_path, compile=False)
assert type(model).__module__.startswith("tf_keras."), type(model)
x = np.stack([np.asarray(Image.open(p)).astype(np.float32)[..., None] / 255.0 for p in images])
np.save(out + "-b1.npy", model.predict(x[:1], verbose=0)[0, ..., 0])
np.save(out + "-b4.npy", model.predict(x, verbose=0)[0, ..., 0])
"""


@pytest.fixture(scope="module")
def users_maps(models, small_images, tmp_path_factory):
    """The plain script's maps of the first image, alone and in a batch of the four, in a
    fresh process whose environment is the shell's with TF_USE_LEGACY_KERAS=1 added."""
    out = tmp_path_factory.mktemp("tf-keras-user") / "mine"
    done = subprocess.run(
        [sys.executable, "-c", PLAIN, str(models / MODEL), str(out), *map(str, small_images)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {batch: Path(f"{out}-{batch}.npy") for batch in ("b1", "b4")}


@pytest.fixture(scope="module")
def runs(models, small_images, tmp_path_factory):
    """Every spec's run, and Keras 3's, on the four images by the real ``segdiff run``."""
    cache = ResultCache(tmp_path_factory.mktemp("tf-keras") / "cache")
    specs = {**SPECS, "keras3": KERAS3}
    configs = [word for spec in specs.values() for word in ("--config", spec)]
    result = segdiff("run", models / MODEL, *small_images, *configs, "--repeats", "1",
                     "--cache", cache.root, "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    entries = dict(zip(specs, json.loads(result.stdout)["runs"], strict=True))
    assert {entry["status"] for entry in entries.values()} == {"finished"}, entries
    return cache, {name: cache.read_run(entry["key"]) for name, entry in entries.items()}


def test_runtime_tf_keras_computes_the_keras_2_scripts_map_bit_for_bit(runs, users_maps):
    """The issue's case: the user's own Keras 2 map, alone and in model.predict's batch,
    is runtime=tf_keras's, bit for bit, and not Keras 3's on the same file."""
    _, records = runs
    for name, batch in (("tf_keras", "b1"), ("b4", "b4")):
        mine = np.load(users_maps[batch])
        assert records[name].probabilities.tobytes() == mine.tobytes(), name
    # Keras 3 computes batch normalisation in another order: a few ULP on many pixels.
    keras3 = compare_maps(np.load(users_maps["b1"]), records["keras3"].probabilities)
    assert 0 < keras3.max_ulp < 100 and keras3.differing_pixels > 0, keras3


def test_each_knob_tf_keras_takes_is_honoured_or_read_back(runs):
    _, records = runs
    shown = assert_honoured(SPECS, records)
    assert {"knobs: threads", "knobs: onednn", "keep: keep_float32"} <= set(shown), shown
    stated = records["tf_keras"].provenance.to_dict()
    version = importlib.metadata.version("tf-keras")
    assert stated["runtime"] == "tf_keras" and records["tf_keras"].label == "tf_keras cpu b1 r0"
    assert stated["runtime_version"] == stated["keras_version"] == version
    assert stated["keras_backend"] == "tensorflow" and stated["weights_device"] == "cpu:0"
    assert stated["environment"]["TF_USE_LEGACY_KERAS"] == "1"
    # Keras 2's predict compiles without XLA unless compiled so: keyed, and read back.
    assert stated["defaults_in_effect"]["xla"] is False and stated["xla"] is False
    assert records["bf16"].provenance.to_dict()["compute_dtype"] == "bfloat16"
    assert "TF_USE_LEGACY_KERAS" not in records["keras3"].provenance.to_dict()["environment"]


def test_reproduce_names_tf_keras_as_the_runtime_of_the_users_map(
    runs, users_maps, models, small_images, tmp_path
):
    """Keras 3 and Keras 2 are tried first, from the cache here: the user's map is tf_keras's,
    and the runtime is said as the difference. In model.predict's batch of four, the search
    goes on under tf_keras first (its defaults came nearer), and finds its batch."""
    cache = ResultCache(shutil.copytree(runs[0].root, tmp_path / "cache"))
    model = models / MODEL
    alone = segdiff("reproduce", users_maps["b1"], model, small_images[0], "--cache",
                    cache.root, "--json")  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    answer = json.loads(alone.stdout)
    assert answer["match"] == "tf_keras cpu b1"
    assert answer["sentence"] == (
        "your map is tf_keras cpu b1 bit for bit (the runtime: tf_keras, not TensorFlow)"
    )
    assert answer["command"].endswith(f"--config runtime=tf_keras --repeats 1 --cache {cache.root}")
    assert [t["label"] for t in answer["trials"]] == ["cpu b1", "tf_keras cpu b1"]
    batch = segdiff("reproduce", users_maps["b4"], model, *small_images, "--cache", cache.root)
    assert batch.returncode == 0, batch.stderr
    # Whether predict's batch of four changes the map is the CPU's to say (oneDNN off: it
    # need not): where it does not, the defaults are the user's map already.
    if np.array_equal(np.load(users_maps["b4"]), np.load(users_maps["b1"])):
        assert "your map is tf_keras cpu b1 bit for bit (the runtime: tf_keras" in batch.stdout
        return
    assert "your map is tf_keras cpu b4 bit for bit (the runtime: tf_keras" in batch.stdout
    assert "trying one knob at a time under tf_keras" in batch.stderr
    assert "one knob at a time under TensorFlow" not in batch.stderr


def test_a_keras_2_savedmodel_runs_under_tf_keras_as_its_h5_does(models, small_images, tmp_path):
    """tiny_tfkeras.h5 saved by tf-keras as a SavedModel: the same weights, the same map."""
    configs = ("--config", "runtime=tf_keras", "--repeats", "1", "--json", "--trust-model")
    maps = []
    for name, kind in (("tiny_tfkeras.h5", "h5"), ("tiny_tfkeras_savedmodel", "savedmodel")):
        cache = ResultCache(tmp_path / name)
        result = segdiff("run", models / name, small_images[0], *configs, "--cache", cache.root)
        assert result.returncode == 0, result.stderr
        (entry,) = json.loads(result.stdout)["runs"]
        record = cache.read_run(entry["key"])
        maps.append(record.probabilities)
        assert record.provenance.to_dict()["model_format"] == kind
    assert maps[0].tobytes() == maps[1].tobytes()


def test_an_untrusted_keras_2_h5_with_a_lambda_is_refused_before_its_code_runs(
    models, small_images, tmp_path
):
    """tf-keras loads a .h5 without a safe mode, running a Lambda's code whatever
    ``safe_mode`` says: segdiff refuses it from its config first, in one line, and only
    trusted does its code run (the Lambda then leaves its file)."""
    model = models / "lambda_tfkeras.h5"
    ran = models / "lambda_tfkeras.ran"
    ran.unlink(missing_ok=True)
    words = (small_images[0], "--config", "runtime=tf_keras", "--repeats", "1")
    refused = segdiff("run", model, *words, "--cache", tmp_path / "refused")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "contains Python code (e.g. a Lambda layer) that Keras safe mode refuses" in (
        refused.stderr
    )
    assert "--trust-model" in refused.stderr and not ran.exists()
    trusted = segdiff("run", model, *words, "--trust-model", "--cache", tmp_path / "trusted")
    assert trusted.returncode == 0, trusted.stderr
    assert ran.exists()
    ran.unlink()
