"""The knob registry is where a knob is written: parsing, labels, help, attribution, the
planner's grouping and diagnosis read it, and a knob added to a registry reaches them all."""

from dataclasses import fields

import pytest

from segdiff_gui.core.attribution import plan_attribution
from segdiff_gui.core.config import ConfigError, RunConfig, parse_config_spec
from segdiff_gui.core.diagnosis import DOCS
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.runner.plan import plan_matrix
from tests.core.knob_fixture import REGISTRY, FastConfig


def test_run_config_has_exactly_the_registrys_knobs_with_their_defaults():
    assert tuple(f.name for f in fields(RunConfig)) == KNOBS.names
    assert all(f.default == KNOBS.default(f.name) for f in fields(RunConfig))


def test_help_links_and_groups_come_from_the_registry():
    assert KNOBS.help().startswith(
        "runtime=tensorflow|jax|torch|litert|litert-fp16|litert-dynamic-int8|litert-int8|"
        "onnxruntime|openvino|tf_keras, device=cpu|gpu:N, batch=N"
    )
    assert DOCS["xla"] == KNOBS["xla"].link
    groups = {knob.name: carried for knob, carried in KNOBS.groups()}
    assert groups["batch"] == ("batch", "context", "position") and "context" not in groups


def test_a_knob_added_to_a_registry_is_parsed_labelled_and_attributed():
    config = parse_config_spec("batch=4,fastmath=on", FastConfig(), REGISTRY)
    assert config == FastConfig(batch=4, fastmath=True)
    assert REGISTRY.label(config) == "cpu b4 fast"
    assert parse_config_spec(REGISTRY.spec(config), FastConfig(), REGISTRY) == config
    assert "fastmath=on|off" in REGISTRY.help()
    with pytest.raises(ConfigError, match="fastmath must be on or off"):
        parse_config_spec("fastmath=perhaps", FastConfig(), REGISTRY)
    with pytest.raises(ConfigError, match="unknown config key 'fastmath'"):
        parse_config_spec("fastmath=on")  # segdiff's own registry does not know it
    plan = plan_attribution(FastConfig(), FastConfig(batch=4, fastmath=True), REGISTRY)
    assert [(s.knob, s.change) for s in plan.steps] == [
        ("batch", "batch 1 → 4"),
        ("fastmath", "off → on"),
    ]


def test_a_process_level_knob_added_to_a_registry_gets_its_own_child(demo, cache):
    model, images = demo
    configs = [FastConfig(), FastConfig(batch=2), FastConfig(fastmath=True)]
    plan = plan_matrix(model, images[:2], configs, cache=cache, repeats=1, knobs=REGISTRY)
    assert sorted(len(job.runs) for job in plan.jobs) == [1, 2]
    alone = next(job for job in plan.jobs if len(job.runs) == 1)
    assert alone.runs[0].config.fastmath is True
    # Its value is part of the cache key: the fast run is not the plain one.
    assert len({run.key for run in plan.runs}) == 3


def test_a_run_time_knob_added_to_a_registry_reaches_the_forward_key():
    """A child keeps one compiled forward pass per key, and the key was a tuple
    written by hand: a run-time knob missing from it would have reused another value's
    compiled function, and stored its map under the new key."""
    plain, tiled = FastConfig(), FastConfig(tiling=True)
    assert plain.process_settings() == tiled.process_settings()  # they share a child
    assert dict(tiled.forward_key())["tiling"] is True
    assert plain.forward_key() != tiled.forward_key()
    # What only fills the batch builds no other function; every other run-time knob does.
    assert FastConfig(batch=4, context="copies", position=2).forward_key() == plain.forward_key()
    for other in (
        FastConfig(device="gpu:0"), FastConfig(xla=True), FastConfig(precision="mixed_bfloat16"),
        FastConfig(precision="mixed_bfloat16", keep_float32=("conv",)),
    ):  # fmt: skip
        assert other.forward_key() != plain.forward_key(), other
    # A process-level knob is equal within a child: not in the key.
    assert "fastmath" not in dict(FastConfig(fastmath=True).forward_key())


@pytest.mark.parametrize("runtime", ["jax", "torch", "litert", "onnxruntime"])
def test_a_knob_a_runtime_was_not_told_of_is_refused_never_ignored(runtime):
    """Which values a runtime refuses was code; a knob added to the registry but
    not to a runtime's refusals was silently ignored by it (LiteRT computed without it)."""
    with pytest.raises(
        ConfigError,
        match=r"^tiling=on means nothing under .*: it has no such setting \(leave tiling at",
    ):
        FastConfig(runtime=runtime, tiling=True)
    assert FastConfig(runtime=runtime).tiling is False  # at its default it is nothing to say
    assert FastConfig(tiling=True).tiling is True  # TensorFlow was told: it takes it


def test_a_runtime_entry_says_its_environment_and_build_or_cannot_be_made():
    """A runtime's pre-import variables and its build phrase are its entry's, pure
    functions; an entry that leaves either out is a TypeError, never another runtime's."""
    from dataclasses import MISSING, fields

    from segdiff_gui.core.runtimes import RUNTIMES, Runtime

    required = {
        f.name for f in fields(Runtime) if f.default is MISSING and f.default_factory is MISSING
    }
    assert {"environment", "build"} <= required
    torch = RUNTIMES["torch"]
    with pytest.raises(TypeError, match="environment"):
        Runtime(name=torch.name, title=torch.title, package=torch.package, extra=torch.extra,
                engine=torch.engine, link=torch.link, takes=torch.takes,
                build=torch.build)  # fmt: skip
    jax = RUNTIMES["jax"].environment(RunConfig(runtime="jax", determinism=True, threads=1),
                                      False, {"XLA_FLAGS": "--mine"})  # fmt: skip
    assert jax["XLA_FLAGS"].split()[:2] == ["--mine", "--xla_gpu_deterministic_ops=true"]
    assert jax["JAX_PLATFORMS"] == "cpu"
    assert RUNTIMES["tensorflow"].environment(RunConfig(onednn=False), False, {}) == {
        "TF_ENABLE_ONEDNN_OPTS": "0"
    }
    facts = {"onnxruntime_providers": ["CPUExecutionProvider"]}
    assert RUNTIMES["onnxruntime"].build(facts) == "providers CPUExecutionProvider"
