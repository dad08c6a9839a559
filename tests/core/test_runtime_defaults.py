"""A knob left at its default is not forced: oneDNN's default under TensorFlow is
predicted as TensorFlow decides it, keyed by its value in effect, and set runs keep their keys."""

import pytest

from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.hashing import run_key
from segdiff_gui.core.runtime_defaults import (
    DefaultsInEffect,
    Machine,
    defaults_in_effect,
    inference_precision_in_effect,
    keras_predict_compiles,
    needs_accelerator_answer,
    onednn_in_effect,
    openvino_precision_default,
    tensorflow_onednn_default,
)

VNNI = frozenset({"sse4_2", "avx2", "avx512f", "avx512_vnni"})
PLAIN = frozenset({"sse4_2", "avx2", "avx512f"})


@pytest.mark.parametrize(
    ("environ", "flags", "system", "machine", "expected"),
    [
        ({}, VNNI, "Linux", "x86_64", True),
        ({}, PLAIN, "Linux", "x86_64", False),
        ({}, frozenset({"amx_tile"}), "Linux", "x86_64", True),
        ({}, frozenset({"avx_vnni"}), "Linux", "x86_64", True),
        ({}, VNNI, "Windows", "AMD64", False),
        ({}, VNNI, "Darwin", "x86_64", False),
        ({"TF_ENABLE_ONEDNN_OPTS": "1"}, PLAIN, "Linux", "x86_64", True),
        ({"TF_ENABLE_ONEDNN_OPTS": "0"}, VNNI, "Linux", "x86_64", False),
        ({"TF_ENABLE_ONEDNN_OPTS": "false"}, VNNI, "Linux", "x86_64", False),
        ({"TF_ENABLE_ONEDNN_OPTS": "???"}, VNNI, "Linux", "x86_64", True),
    ],
)
def test_tensorflows_onednn_default_follows_the_cpu_and_the_users_variable(
    environ, flags, system, machine, expected
):
    assert tensorflow_onednn_default(environ, flags, system, machine) is expected


def test_the_onednn_knob_is_unset_by_default_and_parses_default_on_off():
    assert RunConfig().onednn is None
    assert RunConfig().label() == "cpu b1"
    assert parse_config_spec("onednn=off").label() == "cpu b1 onednn-off"
    assert parse_config_spec("onednn=on").label() == "cpu b1 onednn"
    assert parse_config_spec("onednn=default").onednn is None
    assert parse_config_spec("onednn=on").to_spec().count("onednn=on") == 1
    assert "onednn=default" in RunConfig().to_spec()
    with pytest.raises(ConfigError, match="onednn must be default, on or off"):
        parse_config_spec("onednn=maybe")


def test_a_run_stored_with_onednn_set_keeps_its_key_and_meaning():
    """Older runs stored onednn=True: such a run is read as onednn=on."""
    stored = RunConfig().to_dict() | {"onednn": True}
    back = RunConfig.from_dict(stored)
    assert back.onednn is True and back.to_dict() == stored
    assert "onednn" not in RunConfig().to_dict()  # the default: its value in effect is keyed


def test_the_value_in_effect_is_keyed_so_two_machines_never_alias():
    common = dict(
        model_hash="m", target_hash="t", batch_hashes=["t"], preprocessing={}, output={},
        config=RunConfig().to_dict(), repeat=0,
    )  # fmt: skip
    on = run_key(**common, defaults_in_effect=DefaultsInEffect(onednn=True).to_dict())
    off = run_key(**common, defaults_in_effect=DefaultsInEffect(onednn=False).to_dict())
    assert on != off
    # Nothing predicted: the key is the one older versions made.
    assert run_key(**common, defaults_in_effect=DefaultsInEffect().to_dict()) == run_key(**common)


def test_only_tensorflows_unset_onednn_is_predicted():
    environ, cpu_only = {"TF_ENABLE_ONEDNN_OPTS": "1"}, Machine()
    assert defaults_in_effect(RunConfig(), environ, cpu_only).onednn is True
    assert defaults_in_effect(RunConfig(onednn=False), environ, cpu_only).onednn is None
    assert defaults_in_effect(RunConfig(runtime="torch"), environ, cpu_only).onednn is None


def test_xla_is_what_model_predict_resolves_jit_compile_auto_to():
    """Keras 3's _resolve_auto_jit_compile: under TensorFlow on where it lists a GPU (even for
    a run placed on the CPU), off under op determinism and on a CPU-only machine; under JAX
    always; nothing to say where XLA means nothing."""
    gpu, cpu_only, saved = Machine(True), Machine(), Machine(True, keras_model=False)

    def xla(config: RunConfig, machine: Machine) -> bool | None:
        return defaults_in_effect(config, {}, machine).xla

    assert xla(RunConfig(), cpu_only) is False
    assert xla(RunConfig(), gpu) is True
    assert xla(RunConfig(device="gpu:0", batch=8), gpu) is True
    assert xla(RunConfig(determinism=True), gpu) is False
    assert xla(RunConfig(), saved) is False  # a SavedModel's call compiles nothing itself
    assert xla(RunConfig(runtime="jax"), cpu_only) is True
    assert xla(RunConfig(runtime="torch"), gpu) is None
    assert xla(RunConfig(runtime="litert"), gpu) is None
    assert xla(RunConfig(xla=False), gpu) is None  # set: nothing to predict
    assert keras_predict_compiles("tensorflow", gpu, False, "Darwin", "arm") is False
    assert keras_predict_compiles("tensorflow", gpu, False, "Linux", "x86_64") is True
    # The device list matters only where the default does.
    assert needs_accelerator_answer(RunConfig())
    assert not needs_accelerator_answer(RunConfig(xla=True))
    assert not needs_accelerator_answer(RunConfig(runtime="jax"))
    assert not needs_accelerator_answer(RunConfig(determinism=True))


def test_the_child_computes_the_resolved_xla_and_the_key_keeps_what_was_asked():
    planned = DefaultsInEffect(onednn=False, xla=True)
    assert planned.applied(RunConfig()) == RunConfig(xla=True)
    assert planned.applied(RunConfig(xla=False)) == RunConfig(xla=False)  # set wins
    assert DefaultsInEffect().applied(RunConfig(runtime="torch")).xla is False
    assert planned.to_dict() == {"onednn": False, "xla": True}
    assert DefaultsInEffect.from_dict({"xla": True, "onednn": "yes"}) == DefaultsInEffect(xla=True)
    common = dict(
        model_hash="m", target_hash="t", batch_hashes=["t"], preprocessing={}, output={},
        config=RunConfig().to_dict(), repeat=0,
    )  # fmt: skip
    with_xla = run_key(**common, defaults_in_effect=planned.to_dict())
    without = run_key(**common, defaults_in_effect={"onednn": False, "xla": False})
    assert with_xla != without
    assert "xla" not in RunConfig().to_dict()  # asked: the default, keyed by its value here
    assert RunConfig.from_dict({"xla": False}).label() == "cpu b1 xla-off"  # a run set so


def test_a_wrong_xla_prediction_is_refused_and_named():
    planned = DefaultsInEffect(xla=True)
    assert planned.mismatch({"predict_jit": True}) == ""
    said = planned.mismatch({"predict_jit": False})
    assert "model.predict compiles this model without XLA here" in said and "xla=" in said
    assert DefaultsInEffect().mismatch({"predict_jit": True}) == ""


def test_a_wrong_prediction_is_refused_and_named():
    planned = DefaultsInEffect(onednn=False)
    assert planned.mismatch({"onednn_enabled": False}) == ""
    said = planned.mismatch({"onednn_enabled": True})
    assert "oneDNN is on by default in this TensorFlow" in said and "onednn=on" in said
    assert DefaultsInEffect().mismatch({"onednn_enabled": True}) == ""


def test_what_was_in_effect_is_said_as_default_or_set():
    assert onednn_in_effect(RunConfig(), "tensorflow", False) == (
        "off: TensorFlow's default on this CPU"
    )
    assert onednn_in_effect(RunConfig(onednn=True), "tensorflow", True) == "on: set (onednn=on)"
    assert onednn_in_effect(RunConfig(), "torch", True) == "on: PyTorch's default"
    assert onednn_in_effect(RunConfig(), "tensorflow", None) == ""
    assert onednn_in_effect(RunConfig(runtime="jax"), "jax", None) == ""


@pytest.mark.parametrize(
    ("flags", "system", "machine", "expected"),
    [
        (VNNI | {"avx512_bf16"}, "Linux", "x86_64", "bf16"),  # Cooper Lake, Zen 4
        (VNNI | {"avx512_bf16", "amx_bf16", "amx_tile"}, "Linux", "x86_64", "bf16"),
        (VNNI, "Linux", "x86_64", "f32"),  # AVX-512 without BF16: f32 unless asked
        (PLAIN, "Linux", "x86_64", "f32"),
        (frozenset({"fp", "asimd", "asimdhp"}), "Linux", "aarch64", "f16"),
        (frozenset({"fp", "asimd"}), "Linux", "aarch64", "f32"),
        (frozenset(), "Darwin", "arm64", "f16"),
        (VNNI | {"avx512_bf16"}, "Windows", "AMD64", None),  # cannot be told from here
    ],
)
def test_openvinos_default_precision_follows_the_cpu(flags, system, machine, expected):
    """The CPU plugin's own choice (config.cpp): bf16 where oneDNN may use
    avx512_core_bf16, f16 on ARM with half-precision arithmetic, f32 elsewhere."""
    assert openvino_precision_default(flags, system, machine) == expected


def test_only_openvinos_unset_inference_precision_is_predicted_and_keyed():
    cpu_only = Machine()
    predicted = defaults_in_effect(RunConfig(runtime="openvino"), {}, cpu_only)
    assert predicted.inference_precision == openvino_precision_default()
    assert defaults_in_effect(RunConfig(), {}, cpu_only).inference_precision is None
    asked = parse_config_spec("runtime=openvino,inference_precision=f32")
    assert defaults_in_effect(asked, {}, cpu_only).inference_precision is None
    assert asked.label() == "openvino cpu b1 infer-f32"
    assert parse_config_spec("runtime=openvino,infer_precision=default").inference_precision is None
    assert "inference_precision" not in RunConfig(runtime="openvino").to_dict()
    stored = DefaultsInEffect(inference_precision="bf16").to_dict()
    assert stored == {"inference_precision": "bf16"}
    assert DefaultsInEffect.from_dict(stored) == DefaultsInEffect(inference_precision="bf16")
    assert DefaultsInEffect.from_dict({"inference_precision": True}) == DefaultsInEffect()
    common = dict(
        model_hash="m", target_hash="t", batch_hashes=["t"], preprocessing={}, output={},
        config=RunConfig(runtime="openvino").to_dict(), repeat=0,
    )  # fmt: skip
    keys = {
        run_key(**common, defaults_in_effect=DefaultsInEffect(inference_precision=p).to_dict())
        for p in ("bf16", "f32")
    }
    assert len(keys) == 2  # a bf16 machine's default run is never an f32 machine's
    with pytest.raises(ConfigError, match="inference_precision must be one of default, f32"):
        parse_config_spec("runtime=openvino,inference_precision=fp8")
    with pytest.raises(ConfigError, match="inference_precision=bf16 means nothing under JAX"):
        parse_config_spec("runtime=jax,inference_precision=bf16")


def test_a_wrong_inference_precision_prediction_is_refused_once_the_model_is_compiled():
    planned = DefaultsInEffect(inference_precision="bf16")
    assert planned.mismatch({}) == ""  # before the compiled model says it
    assert planned.mismatch({"inference_precision": "bf16"}) == ""
    said = planned.mismatch({"inference_precision": "f32"})
    assert said.startswith("OpenVINO's CPU plugin infers in f32 by default here, but segdiff")
    assert "inference_precision=f32 or bf16" in said
    assert DefaultsInEffect().mismatch({"inference_precision": "f32"}) == ""
    assert planned.sentence() == "inference precision bf16: OpenVINO's default on this CPU"


def test_the_inference_precision_in_effect_is_said_as_default_or_set():
    openvino = RunConfig(runtime="openvino")
    assert inference_precision_in_effect(openvino, "bf16") == (
        "bf16: OpenVINO's default on this CPU"
    )
    asked = parse_config_spec("runtime=openvino,inference_precision=f32")
    assert inference_precision_in_effect(asked, "f32") == "f32: set (inference_precision=f32)"
    assert inference_precision_in_effect(RunConfig(), None) == ""


def test_keras_2_has_tensorflows_onednn_default_and_no_xla_unless_compiled_so():
    """Under tf_keras, oneDNN's default is TensorFlow's (predicted and keyed, as
    under TensorFlow), and model.predict compiles without XLA on any machine: Keras 2 resolves
    no "auto", and a model loaded without compiling has no jit_compile=True."""
    keras2, gpu = RunConfig(runtime="tf_keras"), Machine(True)
    environ = {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert defaults_in_effect(keras2, environ, gpu) == DefaultsInEffect(onednn=False, xla=False)
    assert defaults_in_effect(RunConfig(), environ, gpu).xla is True  # Keras 3: with XLA
    assert keras_predict_compiles("tf_keras", gpu, False) is False
    assert not needs_accelerator_answer(keras2)  # no child asked for its GPUs
    assert onednn_in_effect(keras2, "tf_keras", True) == "on: TensorFlow's default on this CPU"
