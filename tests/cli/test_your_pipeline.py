"""The user's own maps. A plain Keras script in a fresh process makes a map;
``segdiff import`` brings it in, ``segdiff reproduce`` finds the configuration that equals it,
and ``segdiff run`` of that configuration is served from the cache. Bad maps are refused in
one line each."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff, segdiff_here

pytestmark = pytest.mark.slow

USER_SCRIPT = """
import sys
import numpy as np
from PIL import Image
import tf_keras  # TensorFlow's defaults: nothing set, as a user's script has it

model_path, out, arithmetic, *images = sys.argv[1:]
model = tf_keras.models.load_model(model_path, compile=False)
batch = []
for path in images:
    img = np.asarray(Image.open(path))
    if arithmetic == "divide":
        x = img.astype(np.float32) / 255.0
    else:
        x = img.astype(np.float32) * np.float32(1 / 255)
    batch.append(x[..., None])
np.save(out, model.predict(np.stack(batch), verbose=0)[0, ..., 0])
"""

BY_HAND = """
import sys
import numpy as np
from PIL import Image
import keras
model = keras.saving.load_model(sys.argv[1])
x = np.asarray(Image.open(sys.argv[2])).astype(np.float32) / 255.0
x = ((x - 0.5) / 0.25)[None, ..., None]
np.save(sys.argv[3], np.ascontiguousarray(model.predict(x, verbose=0)[0, ..., 0]))
"""

ARITHMETICS = ("divide", "multiply")

# Runs each (script, arguments) of its JSON argument as ``__main__``, one after the other.
_ONE_PROCESS = """
import json, sys
for code, args in json.loads(sys.argv[1]):
    sys.argv[1:] = args
    exec(compile(code, "<script>", "exec"), {"__name__": "__main__"})
"""


@pytest.fixture(scope="module")
def users_maps(models, small_images, tmp_path_factory) -> dict[str, Path]:
    """The maps the user's own scripts make of ``small_images[0]``, in one fresh Python with
    no ``TF_`` variable but oneDNN's switch (one TensorFlow import for all): a plain tf-keras
    script's by each arithmetic (``divide``, ``multiply``), and ``prepare``: the tiny Keras 3
    model's map of PREPARE's function applied by hand."""
    out = tmp_path_factory.mktemp("users-maps")
    maps = {name: out / f"{name}.npy" for name in (*ARITHMETICS, "prepare")}
    scripts = [
        *[(USER_SCRIPT, [models / "tiny_tfkeras.h5", maps[a], a, small_images[0]])
          for a in ARITHMETICS],
        (BY_HAND, [models / "tiny.keras", small_images[0], maps["prepare"]]),
    ]  # fmt: skip
    plan = json.dumps([[code, list(map(str, args))] for code, args in scripts])
    # TF_ENABLE_ONEDNN_OPTS stays as the shell has it: segdiff's children see it too, as the
    # user's own script and segdiff run from one shell would (README's tests run either way).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TF_") or k == "TF_ENABLE_ONEDNN_OPTS"
    }
    done = subprocess.run(
        [sys.executable, "-c", _ONE_PROCESS, plan],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return maps


@pytest.fixture(scope="module")
def scripts_cache(tmp_path_factory) -> Path:
    """One cache for both arithmetics' imports: the model's inspection and the reproduce
    search's runs that both need are computed once."""
    return tmp_path_factory.mktemp("scripts-cache") / "cache"


@pytest.mark.parametrize(
    ("arithmetic", "found"),
    [("divide", "your map is cpu b1 bit for bit (the defaults)"),
     ("multiply", "your map is cpu b1 bit for bit (x * float32(1/255))")],
)  # fmt: skip
def test_a_plain_keras_scripts_map_is_imported_reproduced_and_served_from_the_cache(
    models, small_images, users_maps, scripts_cache, tmp_path, capsys, arithmetic, found
):
    model = models / "tiny_tfkeras.h5"
    mine, cache, label = users_maps[arithmetic], scripts_cache, f"my script {arithmetic}"
    imported = segdiff("import", mine, "--model", model, "--image", small_images[0], "--label",
                       label, "--note", "device=laptop", "--cache", cache)  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert "imported: " in imported.stdout and f"imported: {label}" in imported.stdout
    again = segdiff_here(capsys, "import", mine, "--model", model, "--image", small_images[0],
                 "--label", label, "--cache", cache)  # fmt: skip
    assert "already in the cache" in again.stdout  # the same map is one entry
    answer = segdiff("reproduce", mine, model, small_images[0], "--cache", cache)
    assert answer.returncode == 0, answer.stderr
    assert found in answer.stdout
    command = answer.stdout.split("(from the cache): ", 1)[1].strip()
    words = shlex.split(command)[2:]  # after "segdiff run": the cache is among them
    served = segdiff("run", *words, "--json")
    assert served.returncode == 0, served.stderr
    (run,) = json.loads(served.stdout)["runs"]
    assert run["status"] == "cached"
    compared = segdiff_here(capsys, "compare", "--cache", cache, "--json")
    rows = [row for group in json.loads(compared.stdout) for row in group["comparisons"]]
    mine_row = next(row for row in rows if row["label"] == f"imported: {label} r0")
    # Against the group's reference, cpu b1 r0, which divides: equal when the script did.
    assert mine_row["bitwise_equal"] is (arithmetic == "divide")
    stored = ResultCache(cache).read_run(mine_row["key"])
    assert stored.provenance.imported.notes == {"device": "laptop"}
    assert stored.probabilities.tobytes() == np.load(mine).astype(np.float32).tobytes()
    group = next(g["group"] for g in json.loads(compared.stdout) if mine_row in g["comparisons"])
    report = tmp_path / "report.html"
    written = segdiff_here(capsys, "report", "--cache", cache, "--group", group, "--html", report)
    assert written.returncode == 0, written.stderr
    assert f"imported: {label} r0" in report.read_text()
    # It travels in bundles, marked imported there too.
    bundle = tmp_path / "mine.h5"
    made = segdiff_here(capsys, "bundle", bundle, mine_row["id"], "--cache", cache)
    assert made.returncode == 0, made.stderr
    elsewhere = tmp_path / "elsewhere"
    assert segdiff_here(capsys, "merge", bundle, "--cache", elsewhere).returncode == 0
    listed = segdiff_here(capsys, "ls", "--cache", elsewhere, "--json")
    assert f"imported: {label} r0" in [run["label"] for run in json.loads(listed.stdout)]


def test_import_refuses_bad_maps_in_one_line_each(
    models, small_images, tmp_path, capsys, fake_engine
):
    """The command line's handling of a map file: the fake engine answers what the model
    gives (a real child does in the plain Keras script's test above)."""
    model = models / "tiny_tfkeras.h5"
    good = np.full((32, 32), 0.5, dtype=np.float32)
    cases = {
        "nan.npy": (np.where(np.eye(32, dtype=bool), np.nan, good), "NaN or infinite values"),
        "int8.npy": (np.zeros((32, 32), dtype=np.int8), "is int8; a probability map is float32"),
        "shape.npy": (np.zeros((16, 32), dtype=np.float32), "the model's map is 32×32"),
        "logits.npy": (good * 40 - 10, "not probabilities"),
    }
    for name, (values, _) in cases.items():
        np.save(tmp_path / name, values)
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases["objects.npy"] = (None, "holds Python objects (object dtype); segdiff never unpickles")
    for name, (_, said) in cases.items():
        result = segdiff_here(capsys, "import", tmp_path / name, "--model", model, "--image",
                      small_images[0], "--cache", tmp_path / "cache")  # fmt: skip
        assert result.returncode == 2, (name, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0] and name in lines[0], (name, lines)
        assert "Traceback" not in result.stderr
    assert not list(ResultCache(tmp_path / "cache").keys())
    wide = tmp_path / "wide.npy"
    np.save(wide, good.astype(np.float64))
    rounded = segdiff_here(capsys, "import", wide, "--model", model, "--image", small_images[0],
                   "--cache", tmp_path / "cache")  # fmt: skip
    assert rounded.returncode == 0 and "rounded to float32" in rounded.stdout


def test_a_batch_of_maps_is_imported_image_by_image(
    models, small_images, tmp_path, capsys, fake_engine
):
    """The fake engine answers what the model gives, as in the test above."""
    model = models / "tiny_tfkeras.h5"
    batch = np.random.default_rng(0).random((4, 32, 32, 1), dtype=np.float32)
    np.save(tmp_path / "batch.npy", batch)
    result = segdiff_here(capsys, "import", tmp_path / "batch.npy", "--model", model,
                  *[a for image in small_images for a in ("--image", image)],
                  "--cache", tmp_path / "cache", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["image"] for row in rows] == [path.name for path in small_images]
    cache = ResultCache(tmp_path / "cache")
    for row, values in zip(rows, batch, strict=True):
        assert cache.read_run(row["key"]).probabilities.tobytes() == values[..., 0].tobytes()


def test_a_batch_effect_that_vanishes_with_onednn_off_is_offered_as_its_remedy(
    models, small_images, tmp_path, capsys
):
    """On real children: with oneDNN on, batch 4 moves the tiny model's map; with it
    off, it moves nothing (on the CPUs measured). diagnose offers oneDNN off with its figure;
    explain between two runs that are bitwise equal headlines no knob. What each says is
    checked against the maps this CPU's kernels gave, not assumed."""
    cache = tmp_path / "cache"
    ran = segdiff("run", models / "tiny.keras", *small_images, "--cache", cache, "--repeats", "1",
                  "--config", "onednn=on", "--config", "batch=4,onednn=on",
                  "--config", "onednn=off", "--config", "batch=4,onednn=off")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    stored = ResultCache(cache)
    maps = {
        record.label: stored.read_run(record.key).probabilities.tobytes()
        for record in stored.records()
    }
    moved_on = maps["cpu b4 onednn r0"] != maps["cpu b1 onednn r0"]
    moved_off = maps["cpu b4 onednn-off r0"] != maps["cpu b1 onednn-off r0"]
    diagnosed = segdiff_here(
        capsys, "diagnose", "--cache", cache, "--ref", "cpu b1 onednn", "--json"
    )
    assert diagnosed.returncode == 0, diagnosed.stderr
    (group,) = json.loads(diagnosed.stdout)
    findings = group["findings"]
    moved = [f for f in findings if f["sentence"].startswith("Changing the batch")]
    assert bool(moved) is moved_on, findings
    if moved_on:
        assert "cpu b4 onednn against cpu b1 onednn r0" in moved[0]["sentence"]
    remedy = [f for f in findings if f["sentence"].startswith("With oneDNN off, the batch")]
    assert len(remedy) == (moved_on and not moved_off), findings
    if remedy:
        assert remedy[0]["topic"] == "advice"
        assert "cpu b4 onednn-off equals cpu b1 onednn-off bit for bit" in remedy[0]["sentence"]
        assert remedy[0]["figure"].startswith("0 vs ")
    explained = segdiff_here(capsys, "explain", "--cache", cache, "--from", "cpu b1 onednn-off r0",
                     "--to", "cpu b4 onednn-off r0")  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    equal = "The two are bitwise equal in total: no knob explains a difference"
    assert (equal in explained.stdout) is not moved_off
    if not moved_off:
        assert "Largest single knob" not in explained.stdout


PREPARE = """
import numpy as np
from PIL import Image


def prepare(image):
    x = image.astype(np.float32) / 255.0
    return (x - 0.5) / 0.25
"""


def test_your_preprocessing_function_runs_only_trusted_and_is_keyed_by_its_bytes(
    models, small_images, users_maps, tmp_path
):
    """``--preprocess FILE.py:function`` gives the model's input; it runs in the
    child only with --trust-preprocess, its map equals the same function applied by hand, and
    another file's bytes are another key."""
    code = tmp_path / "prepare.py"
    code.write_text(PREPARE)
    model, cache = models / "tiny.keras", tmp_path / "cache"
    common = [model, small_images[0], "--cache", cache, "--config", "batch=1",
              "--repeats", "1", "--preprocess", f"{code}:prepare"]  # fmt: skip
    refused = segdiff("run", *common)
    assert refused.returncode == 2
    assert "is your own code" in refused.stderr and "--trust-preprocess" in refused.stderr
    ran = segdiff("run", *common, "--trust-preprocess", "--json")
    assert ran.returncode == 0, ran.stderr
    (run,) = json.loads(ran.stdout)["runs"]
    stored = ResultCache(cache).read_run(run["key"])
    assert stored.preprocessing["function"] == "prepare.py:prepare"
    assert stored.provenance.to_dict()["target_input"] == "your function prepare.py:prepare"
    by_hand = np.load(users_maps["prepare"])  # the same function applied by hand
    assert by_hand.dtype == np.float32
    assert stored.probabilities.tobytes() == by_hand.tobytes()
    code.write_text(PREPARE.replace("0.25", "0.5"))
    again = segdiff("run", *common, "--trust-preprocess", "--json")
    (other,) = json.loads(again.stdout)["runs"]
    assert other["key"] != run["key"] and other["status"] == "finished"
    (tmp_path / "boom.py").write_text("def prepare(image):\n    raise ValueError('my bug')\n")
    boom = segdiff("run", *common[:-1], f"{tmp_path / 'boom.py'}:prepare", "--trust-preprocess")
    assert boom.returncode == 2 and "prepare() in boom.py raised ValueError: my bug" in boom.stderr


def test_a_float_npy_is_the_models_input_as_it_is(
    models, small_images, tmp_path, capsys, engine_starts
):
    """A .npy of float32 is used as it is (no scaling, no colour change); a float64
    one, one of the wrong shape, or one given with scaling, is refused in one line, before
    any child starts (the model's size is what the first run's child said of it)."""
    pixels = np.asarray(Image.open(small_images[0]))
    tensor = tmp_path / "input.npy"
    np.save(tensor, pixels.astype(np.float32) / 255.0)
    model, cache = models / "tiny.keras", tmp_path / "cache"
    # Both in one matrix (one child): --sweep makes each of them a target of its own.
    both = segdiff("run", model, tensor, small_images[0], "--sweep", "--cache", cache,
                   "--config", "batch=1", "--repeats", "1", "--json")  # fmt: skip
    assert both.returncode == 0, both.stderr
    store = ResultCache(cache)
    runs = [store.read_run(run["key"]) for run in json.loads(both.stdout)["runs"]]
    tensor_run, image_run = sorted(runs, key=lambda run: run.target_name != tensor.name)
    assert (tensor_run.target_name, image_run.target_name) == (tensor.name, small_images[0].name)
    assert (
        tensor_run.provenance.to_dict()["target_input"] == "a tensor, as it is (a .npy of floats)"
    )
    assert tensor_run.probabilities.tobytes() == image_run.probabilities.tobytes()
    for name, values, extra, said in (
        ("wide.npy", pixels.astype(np.float64) / 255.0, [], "is a float64 tensor"),
        ("small.npy", np.zeros((16, 32), np.float32), [], "the model takes 32×32×1"),
        ("scaled.npy", pixels.astype(np.float32), ["--divide", "255"], "takes no divide"),
    ):
        np.save(tmp_path / name, values)
        refused = segdiff_here(capsys, "run", model, tmp_path / name, "--cache", cache,
                               "--config", "batch=1", "--repeats", "1", *extra)  # fmt: skip
        assert refused.returncode == 2, (name, refused.stdout, refused.stderr)
        (line,) = refused.stderr.strip().splitlines()
        assert said in line and name in line, (name, refused.stderr)
    assert engine_starts == []  # each refused when planned


def test_the_same_run_again_of_an_rgba_target_under_color_rgb_runs_as_printed(
    models, tmp_path, capsys
):
    """On a real child: an RGBA photo for an RGB model needs --color rgb; the
    printed command left it out, and run as printed it exited 2. Its words now parse into
    the very request the match ran (tests/cli/test_suggested_run.py), cache and all."""
    rng = np.random.default_rng(49)
    photo = tmp_path / "a photo.png"
    Image.fromarray(rng.integers(0, 256, (32, 32, 4), dtype=np.uint8), "RGBA").save(photo)
    model, cache = models / "rgb_tfkeras.h5", tmp_path / "cache"
    ran = segdiff_here(capsys, "run", model, photo, "--color", "rgb", "--config", "batch=1",
                       "--repeats", "1", "--cache", cache, "--json")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (run,) = json.loads(ran.stdout)["runs"]
    mine = tmp_path / "mine.npy"
    np.save(mine, ResultCache(cache).read_run(run["key"]).probabilities)
    answer = segdiff_here(capsys, "reproduce", mine, model, photo, "--color", "rgb",
                          "--cache", cache)  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    command = answer.stdout.split("(from the cache): ", 1)[1].strip()
    words = shlex.split(command)
    assert "--color" in words and words[words.index("--color") + 1] == "rgb"
    served = segdiff_here(capsys, *words[1:], "--json")
    assert served.returncode == 0, served.stderr
    assert [r["status"] for r in json.loads(served.stdout)["runs"]] == ["cached"]
