"""Keras 2 models under ``runtime=tf_keras``, read as untrusted: tf_keras has no
safe mode for a ``.h5`` (a Lambda's bytecode runs whatever ``safe_mode`` says), so the child
reads the model's config first and refuses code in one line (engine/keras2_config.py, by
core/trust.py's rule), before tf_keras reads a layer; and the planner refuses, before any
child, what Keras 2 cannot read: a Keras 3 ``.keras``, a SavedModel without Keras 2's
metadata. The real child's refusal of a Lambda, and that its code never ran, is
tests/engine/test_tf_keras.py's."""

import json
import zipfile

import h5py
import numpy as np
import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.trust import untrusted_keras2_code
from segdiff_gui.engine import keras2_config
from segdiff_gui.engine.keras2_config import check_not_code
from segdiff_gui.runner.plan import keras_archive_version, model_refusal

KERAS2 = RunConfig(runtime="tf_keras")


def _layer(class_name, **config):
    return {"class_name": class_name, "config": {"name": class_name.lower(), **config}}


def _model(*layers):
    """A functional model's config whose second layer is a nested model holding ``layers``."""
    nested = {"class_name": "Functional", "config": {"name": "inner", "layers": list(layers)}}
    return {"class_name": "Functional", "config": {"layers": [_layer("InputLayer"), nested]}}


@pytest.mark.parametrize(
    ("layer", "refused"),
    [
        (_layer("Lambda", function=["4wEAAAAA", None, None]), "contains Python code (e.g. a Lam"),
        (_layer("TFOpLambda", function="io.write_file"), "calling TensorFlow's 'io.write_file'"),
        (_layer("TFOpLambda", function="raw_ops.WriteFile"), "'raw_ops.WriteFile' (a Keras 2"),
        (_layer("TFOpLambda", function="compat.v1.write_file"), "'compat.v1.write_file'"),
        (_layer("TFOpLambda", function="print"), "calling TensorFlow's 'print'"),
        (_layer("SlicingOpLambda", function={"x": 1}), "calling TensorFlow's 'dict'"),
        (_layer("TFOpLambda", function="math.multiply"), ""),
        (_layer("SlicingOpLambda", function="__operators__.getitem"), ""),
        (_layer("TFOpLambda", function="concat"), ""),
        (_layer("Conv2D", filters=4), ""),
    ],
)
def test_what_is_code_in_a_keras_2_config_is_refused_wherever_it_is_nested(layer, refused):
    said = untrusted_keras2_code("m.h5", _model(_layer("Conv2D"), layer))
    if not refused:
        assert said is None
        return
    assert said is not None and said.fix == "trust_model=on"
    assert str(said).startswith("m.h5: ") and refused in str(said), str(said)
    assert "\n" not in str(said)


def _h5(path, config):
    with h5py.File(path, "w") as handle:
        if config is not None:
            handle.attrs["model_config"] = config
    return path


def test_the_child_reads_a_keras_2_files_config_before_tf_keras_does(tmp_path, monkeypatch):
    """A .h5's ``model_config`` attribute and a .keras archive's ``config.json``, each read
    within its bound: code, a config that is not JSON text or is over the bound, and a file
    h5py cannot read are each one line naming the file; a model without code passes."""
    lam = json.dumps(_model(_layer("Lambda", function="x")))
    with pytest.raises(InputError, match=r"lam\.h5: contains Python code"):
        check_not_code(_h5(tmp_path / "lam.h5", lam.encode()))
    with pytest.raises(InputError, match=r"lam\.h5: contains Python code"):
        check_not_code(_h5(tmp_path / "lam.h5", lam))  # stored as text
    with zipfile.ZipFile(tmp_path / "lam.keras", "w") as archive:
        archive.writestr("config.json", lam)
    with pytest.raises(InputError, match=r"lam\.keras: contains Python code"):
        check_not_code(tmp_path / "lam.keras")
    with pytest.raises(InputError, match=r"odd\.h5: holds a model config that is not JSON$"):
        check_not_code(_h5(tmp_path / "odd.h5", b"\xff{"))
    with pytest.raises(InputError, match="not JSON text"):
        check_not_code(_h5(tmp_path / "array.h5", np.arange(4)))
    (tmp_path / "fake.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    with pytest.raises(InputError, match=r"fake\.h5: cannot be read as a Keras 2 model: "):
        check_not_code(tmp_path / "fake.h5")
    plain = json.dumps(_model(_layer("Conv2D"), _layer("TFOpLambda", function="nn.relu")))
    check_not_code(_h5(tmp_path / "plain.h5", plain))
    check_not_code(_h5(tmp_path / "bare.h5", None))  # no config: tf_keras says so
    fixed = _h5(tmp_path / "fixed.h5", plain.encode())  # a fixed-length string: sized first
    monkeypatch.setattr(keras2_config, "MAX_MODEL_CONFIG_BYTES", 64)
    for path in (tmp_path / "plain.h5", fixed):
        with pytest.raises(InputError, match=rf"{path.name}: holds a model config of 0 MB, over"):
            check_not_code(path)


def _keras_archive(path, metadata):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", "{}")
        archive.writestr("metadata.json", metadata)
    return path


def test_keras_2_refuses_what_it_cannot_read_before_any_child(tmp_path, capsys, fake_engine):
    """A Keras 3 .keras (tf_keras cannot deserialize Keras 3's classes) and a SavedModel
    Keras 3 exported (no keras_metadata.pb): one line each, naming the file and the runtime
    that reads it; a .keras tf_keras wrote and a Keras 2 SavedModel are taken."""
    keras3 = _keras_archive(tmp_path / "k3.keras", json.dumps({"keras_version": "3.15.1"}))
    assert keras_archive_version(keras3) == "3.15.1"
    refused = model_refusal(keras3, KERAS2)
    assert str(refused) == (
        f"{keras3}: is a Keras 3.15.1 .keras file, which tf_keras (Keras 2) cannot read; Keras "
        "3 runs it (runtime=tensorflow)"
    )
    assert model_refusal(keras3, RunConfig()) is None
    keras2 = _keras_archive(tmp_path / "k2.keras", json.dumps({"keras_version": "2.21.0"}))
    assert model_refusal(keras2, KERAS2) is None
    for odd in ("[1]", json.dumps({"keras_version": "3\x1b]0;x\x07"}), "{", "x" * 70_000):
        assert keras_archive_version(_keras_archive(tmp_path / "odd.keras", odd)) == ""
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / "saved_model.pb").write_bytes(b"\x08\x01")
    assert "is a SavedModel without Keras 2's keras_metadata.pb: tf_keras cannot load" in str(
        model_refusal(exported, KERAS2)
    )
    (exported / "keras_metadata.pb").write_bytes(b"\x08\x01")
    assert model_refusal(exported, KERAS2) is None
    assert "runs only under TensorFlow, not jax" in str(
        model_refusal(exported, RunConfig(runtime="jax"))
    )
    image = tmp_path / "image.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))
    args = ["run", str(keras3), str(image), "--cache", str(tmp_path / "cache")]
    assert segdiff([*args, "--config", "runtime=tf_keras"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "k3.keras: is a Keras 3.15.1 .keras file, which tf_keras (Keras 2) cannot" in line


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("runtime=tf_keras,precision=fp64", "precision=float64 means nothing under tf_keras"),
        ("runtime=tf_keras,emulate=tf32", "emulate=tf32 means nothing under tf_keras"),
        ("runtime=tf_keras,inference_precision=bf16", "inference_precision=bf16 means nothing"),
    ],
)
def test_knobs_keras_2_refuses_are_refused_in_one_line_before_any_child(
    tmp_path, capsys, fake_engine, spec, said
):
    model = _h5(tmp_path / "m.h5", "{}")
    image = tmp_path / "image.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))
    assert segdiff(["run", str(model), str(image), "--config", spec]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert said in line
