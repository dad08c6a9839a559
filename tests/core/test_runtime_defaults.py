"""A knob left at its default is not forced (issue 32): oneDNN's default under TensorFlow is
predicted as TensorFlow decides it, keyed by its value in effect, and set runs keep their keys."""

import pytest

from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.hashing import run_key
from segdiff_gui.core.runtime_defaults import (
    DefaultsInEffect,
    defaults_in_effect,
    onednn_in_effect,
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
    """Before issue 32 every run stored onednn=True: such a run is read as onednn=on."""
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
    # Nothing predicted: the key is the one made before issue 32.
    assert run_key(**common, defaults_in_effect=DefaultsInEffect().to_dict()) == run_key(**common)


def test_only_tensorflows_unset_onednn_is_predicted():
    environ = {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert defaults_in_effect(RunConfig(), environ) == DefaultsInEffect(onednn=True)
    assert defaults_in_effect(RunConfig(onednn=False), environ) == DefaultsInEffect()
    assert defaults_in_effect(RunConfig(runtime="torch"), environ) == DefaultsInEffect()


def test_a_wrong_prediction_is_refused_and_named():
    planned = DefaultsInEffect(onednn=False)
    assert planned.mismatch({"onednn_enabled": False}) == ""
    said = planned.mismatch({"onednn_enabled": True})
    assert "oneDNN is on by default in this TensorFlow" in said and "onednn=on" in said
    assert DefaultsInEffect().mismatch({"onednn_enabled": True}) == ""


def test_what_was_in_effect_is_said_as_default_or_set():
    tf = {"runtime": "tensorflow", "onednn_enabled": False}
    assert onednn_in_effect(RunConfig(), tf) == "off: TensorFlow's default on this CPU"
    assert onednn_in_effect(RunConfig(onednn=True), tf | {"onednn_enabled": True}) == (
        "on: set (onednn=on)"
    )
    assert onednn_in_effect(RunConfig(runtime="jax"), {"runtime": "jax"}) == ""
