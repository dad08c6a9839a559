"""Code a model file carries, under every runtime's own child (held cases of the
review, kept here). A ``.keras`` model is untrusted until the user trusts it: a Lambda layer
whose marshalled bytecode writes a file is refused by Keras's safe mode in every child that
loads the model, whichever runtime it runs (each loads it under its own Keras backend, or
under TensorFlow to convert it), in one line that says how to trust it; and a layer naming a
module that a folder of the user's plants (``keras_cv``, which Keras would import by name) is
never imported from the model's folder or the working folder, trusted or not: children start
with ``python -P`` and put neither on their path.

Real children (the point is each runtime's own load), one per runtime's engine module and
payload; the payload's own power is shown once, trusted, under TensorFlow."""

from __future__ import annotations

import base64
import importlib.util
import json
import marshal
import zipfile
from pathlib import Path

import pytest

from segdiff_gui.core.runtimes import RUNTIMES as RUNTIME_ENTRIES
from segdiff_gui.core.runtimes import RUNTIMES_IN_ORDER
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300, method="thread")]

# One runtime per engine module (LiteRT's four conversions share one child), where installed.
_ENGINES: dict[str, str] = {}
for _runtime in RUNTIMES_IN_ORDER:
    if importlib.util.find_spec(_runtime.package) is not None:
        _ENGINES.setdefault(_runtime.engine, _runtime.name)
RUNTIMES = sorted(_ENGINES.values())


def _edited(out: Path, edit) -> Path:
    """The demo model with its config edited by ``edit`` (its weights as they are)."""
    with zipfile.ZipFile(demo_model()) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "config.json":
                config = json.loads(data)
                edit(next(layer for layer in config["config"]["layers"]
                          if layer["config"]["name"] == "pool1"))  # fmt: skip
                data = json.dumps(config).encode()
            target.writestr(info, data)
    return out


def _lambda_payload(folder: Path, marker: Path) -> Path:
    """A Lambda in place of a pooling layer, whose function writes ``marker`` when it runs
    (as Keras builds the model, on its symbolic input)."""
    function = eval(
        f"lambda t: (__import__('pathlib').Path({str(marker)!r}).write_text('x'), t)[1]"
    )  # noqa: S307
    code = base64.b64encode(marshal.dumps(function.__code__)).decode()

    def edit(layer: dict) -> None:
        layer.update(class_name="Lambda", module="keras.layers", registered_name=None)
        layer["config"] = {
            "name": "pool1",
            "trainable": True,
            "dtype": layer["config"]["dtype"],
            "function": {"class_name": "__lambda__",
                         "config": {"code": code, "defaults": None, "closure": None}},
            "arguments": {},
        }  # fmt: skip

    return _edited(folder / "lambda_payload.keras", edit)


def _module_payload(folder: Path, marker: Path) -> Path:
    """A layer of module ``keras_cv.layers`` (Keras imports a ``keras_cv`` module by name;
    it is not installed), and a ``keras_cv`` package planted beside the model, whose import
    writes ``marker``."""
    planted = folder / "keras_cv"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    (planted / "layers.py").write_text("")

    def edit(layer: dict) -> None:
        layer.update(class_name="Payload", module="keras_cv.layers", registered_name=None)

    return _edited(folder / "module_payload.keras", edit)


@pytest.fixture
def payloads(tmp_path, monkeypatch) -> tuple[Path, Path, Path]:
    """Both payload models in one folder, the working folder of segdiff and its children;
    the file either payload writes if it ever runs."""
    assert importlib.util.find_spec("keras_cv") is None
    marker = tmp_path / "payload-ran"
    monkeypatch.chdir(tmp_path)
    return _lambda_payload(tmp_path, marker), _module_payload(tmp_path, marker), marker


def _run(capsys, model: Path, cache: Path, runtime: str, *more: str):
    config = f"runtime={runtime},batch=1"
    return segdiff_here(capsys, "run", model, demo_images()[0], "--config", config,
                        "--repeats", "1", "--cache", cache, *more)  # fmt: skip


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_models_code_never_runs_untrusted_under_any_runtime(runtime, payloads, tmp_path, capsys):
    """Keras 2 (tf_keras) reads no Keras 3 ``.keras``: both payloads are refused before any
    child, in the planner's line (its own Lambda payload, a ``.h5``, is
    tests/engine/test_tf_keras.py's)."""
    lambda_model, module_model, marker = payloads
    cache = tmp_path / "cache"
    keras2 = RUNTIME_ENTRIES[runtime].keras == 2
    refused = _run(capsys, lambda_model, cache, runtime)
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    if keras2:
        assert line.startswith(f"segdiff: {lambda_model}: is a Keras 3.") and "cannot read" in line
    else:
        said = f"segdiff: {lambda_model}: contains Python code (e.g. a Lambda layer)"
        assert line.startswith(said) and line.endswith("— add --trust-model")
    unloaded = _run(capsys, module_model, cache, runtime)
    assert unloaded.returncode == 2, unloaded.stderr
    (line,) = unloaded.stderr.strip().splitlines()
    said = "is a Keras 3." if keras2 else "cannot be loaded as a Keras model"
    assert line.startswith(f"segdiff: {module_model}: {said}")
    assert not marker.exists()
    assert not ResultCache(cache).keys()


def test_trusted_the_lambda_runs_and_a_planted_module_still_never_loads(payloads, tmp_path, capsys):
    """What trust means: the Lambda's code runs (the payload is real), while a module named
    by the config is still never imported from the user's folders."""
    lambda_model, module_model, marker = payloads
    cache = tmp_path / "cache"
    _run(capsys, module_model, cache, "tensorflow", "--trust-model")
    assert not marker.exists()
    _run(capsys, lambda_model, cache, "tensorflow", "--trust-model")
    assert marker.read_text() == "x"
