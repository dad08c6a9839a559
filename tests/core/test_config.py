import pytest

from segdiff_gui.core.config import (
    ConfigError,
    Preprocessing,
    RunConfig,
    parse_config_spec,
    parse_preprocessing,
)
from segdiff_gui.core.runtimes import RUNTIMES, calibration_set
from segdiff_gui.runner.plan import batch_slots


def test_spec_parses_every_knob_and_round_trips():
    spec = (
        "device=gpu:1,batch=64,context=copies,position=3,determinism=on,tf32=off,"
        "onednn=off,threads=1,xla=on,precision=mixed_bfloat16,keep_float32=mask+enc/conv,"
        "repeat_scope=fresh"
    )
    config = parse_config_spec(spec)
    assert config == RunConfig(
        "tensorflow", "gpu:1", 64, "copies", 3, True, False, False, 1, True, "mixed_bfloat16",
        ("enc/conv", "mask"), None, None, None, "off", "fresh",
    )  # fmt: skip
    assert parse_config_spec(config.to_spec()) == config
    assert config.label() == (
        "gpu:1 b64 copies pos3 det tf32-off onednn-off threads1 xla bf16 f32:enc/conv+mask fresh"
    )
    with pytest.raises(ConfigError, match="computes everything in float32 already"):
        parse_config_spec("keep_float32=mask")
    many = parse_config_spec("precision=bf16,keep_float32=" + "+".join("abcde"))
    assert many.label().startswith("cpu b1 bf16 f32×5#") and "keep_float32" not in str(
        RunConfig().to_dict()
    )
    assert parse_config_spec("backend=jax,scope=fresh").label() == "jax cpu b1 fresh"


def test_emulated_tf32_is_a_cpu_float32_knob_of_tensorflow_said_in_one_line():
    """emulate=tf32 predicts a GPU's TF32 on the CPU; asked where it means nothing,
    it is refused before any child, in one line saying what to set."""
    config = parse_config_spec("emulate=tf32,xla=on,batch=4")
    assert config.label() == "cpu b4 xla emu-tf32" and config.to_dict()["emulate"] == "tf32"
    assert ("emulate", "tf32") in config.forward_key()  # its own compiled forward pass
    assert "emulate" not in RunConfig().to_dict()  # older keys stay as they were
    assert parse_config_spec("emulate=emu-tf32") == parse_config_spec("emulate=tf32")
    assert parse_config_spec("runtime=jax,emulate=tf32,xla=off").label() == (
        "jax cpu b1 xla-off emu-tf32"
    )
    assert parse_config_spec("runtime=torch,emulate=tf32").emulate == "tf32"
    refusals = {
        "device=gpu:0": "emulation is for CPU runs; on a GPU use tf32=on",
        "precision=mixed_float16": "(precision=float32)",
        "tf32=off": "(leave tf32 on)",
        "runtime=openvino": "means nothing under OpenVINO: OpenVINO compiles the model",
        "runtime=litert-int8": "the converted model runs in its own kernels",
        "runtime=onnxruntime": "(runtime=tensorflow, jax or torch)",
    }
    for spec, said in refusals.items():
        with pytest.raises(ConfigError) as refused:
            parse_config_spec(f"emulate=tf32,{spec}")
        line = str(refused.value)
        assert said in line and line.startswith("emulate=tf32 ") and "\n" not in line, line


def test_knobs_added_later_leave_older_keys_alone():
    # A configuration at the runtime's and the repeat scope's defaults is stored (and keyed)
    # as before they existed, so every cached run keeps its key.
    assert "runtime" not in RunConfig().to_dict()
    assert "repeat_scope" not in RunConfig().to_dict()
    assert RunConfig(runtime="jax").to_dict()["runtime"] == "jax"
    assert RunConfig.from_dict(RunConfig(repeat_scope="fresh").to_dict()).fresh_repeats


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("runtime=jax,onednn=off", "onednn=off means nothing under JAX"),
        ("runtime=jax,threads=4", "threads=4 cannot be set under JAX"),
        ("runtime=torch,xla=on", "xla=on means nothing under PyTorch"),
        ("runtime=mxnet", "runtime must be one of tensorflow, jax, torch"),
        ("runtime=litert,xla=on", "xla=on means nothing under LiteRT float32"),
        ("runtime=onnxruntime,onednn=off", "onednn=off means nothing under ONNX Runtime"),
        ("runtime=litert-int8,precision=bf16", "the conversion sets the model's precision"),
        ("runtime=litert,device=gpu:0", "LiteRT's GPU delegate is built for Android and iOS"),
        ("runtime=litert-fp16,determinism=on", "determinism=on means nothing under LiteRT"),
        ("runtime=litert-dynamic-int8,tf32=off", "tf32=off means nothing under LiteRT"),
        ("runtime=litert-int8,keep_float32=enc1", "keep_float32 means nothing under LiteRT full"),
        # The exact reference: the Keras model itself, in float64, nothing rounded.
        ("runtime=onnxruntime,precision=fp64", "precision=float64 means nothing under ONNX Runt"),
        ("runtime=openvino,precision=fp64", "the exact reference computes the Keras model"),
        ("precision=fp64,tf32=off", "tf32=off means nothing under precision=float64"),
        ("precision=fp64,keep_float32=enc1", "computes everything in float64 already"),
        # Keras 2: TensorFlow's knobs, but not the exact reference nor emulation.
        ("runtime=tf_keras,precision=fp64", "precision=float64 means nothing under tf_keras"),
        ("runtime=tf_keras,emulate=tf32", "emulate=tf32 means nothing under tf_keras: Keras 2"),
        ("runtime=tf_keras,inference_precision=f32", "inference_precision=f32 means nothing"),
    ],
)
def test_knobs_that_mean_nothing_under_a_runtime_are_refused(spec, fragment):
    with pytest.raises(ConfigError, match=fragment) as refused:
        parse_config_spec(spec)
    assert "\n" not in str(refused.value)


def test_onnx_runtime_maps_determinism_tf32_and_threads_and_takes_a_gpu():
    config = parse_config_spec("runtime=onnxruntime,device=gpu:1,determinism=on,tf32=off,threads=2")
    assert (config.device, config.determinism, config.tf32, config.threads) == (
        "gpu:1",
        True,
        False,
        2,
    )
    assert parse_config_spec("runtime=litert,threads=1").label() == "litert cpu b1 threads1"


def test_full_int8_calibration_is_the_sets_distinct_images_in_hash_order_at_most_a_limit():
    hashes = [f"{i:064x}" for i in (5, 3, 3, 9, 1)]
    assert calibration_set(hashes, 10) == sorted(set(hashes))
    assert calibration_set(list(reversed(hashes)), 10) == calibration_set(hashes, 10)
    many = [f"{i:064x}" for i in range(1000)]
    chosen = calibration_set(many, 100)
    assert len(chosen) == 100 and chosen[0] == many[0] and chosen == sorted(chosen)
    assert len(set(chosen)) == 100


def test_the_exact_reference_is_float64_and_no_reduced_precision():
    exact = parse_config_spec("precision=fp64")
    assert exact.precision == "float64" and exact.label() == "cpu b1 fp64"
    assert exact.is_exact and not exact.reduced_precision and exact.map_dtype.str == "<f8"
    plain, bf16 = RunConfig(), parse_config_spec("precision=bf16")
    assert not plain.is_exact and plain.map_dtype.str == "<f4" and bf16.reduced_precision


def test_defaults_and_aliases():
    assert parse_config_spec("batch=1") == RunConfig()
    assert parse_config_spec("device=gpu,precision=bf16").device == "gpu:0"
    assert parse_config_spec("precision=fp16").precision == "mixed_float16"
    assert RunConfig(batch=64).label() == "cpu b64"


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("device=tpu", "device must be"),
        ("batch=0", "batch must be between 1 and 4,096"),
        ("batch=4,position=4", "position 4 is outside a batch of 4"),
        ("xla=maybe", "xla must be default, on or off"),
        ("threads=two", "threads must be a whole number"),
        ("precision=float128", "precision must be one of"),
        ("colour=red", "unknown config key 'colour'"),
        ("batch", "not key=value"),
        ("", "an empty configuration"),
        ("device=cpu,device=gpu:0", "gives device twice"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config_spec(spec)


def test_batch_one_has_no_context():
    assert RunConfig(batch=1, context="copies") == RunConfig(batch=1)


def test_process_settings_split_children():
    assert RunConfig(batch=64, xla=True).process_settings() == RunConfig().process_settings()
    assert RunConfig(threads=1).process_settings() != RunConfig().process_settings()
    assert RunConfig(onednn=False).process_settings() != RunConfig().process_settings()
    assert RunConfig(determinism=True).process_settings() != RunConfig().process_settings()


def test_runtimes_share_a_child_only_where_their_module_and_environment_are_one():
    """A runtime whose sessions are opened for it (``runtime`` in ``per_session``) shares its
    child with the runtimes of its engine module: they must set one environment before that
    module's import and take the same session knobs, or a child would run one runtime in
    another's process. Every other runtime's runs are alone in their children."""
    by_child: dict[tuple[object, ...], set[str]] = {}
    for runtime in RUNTIMES.values():
        by_child.setdefault(RunConfig(runtime=runtime.name).process_settings(), set()).add(
            runtime.name
        )
    shared = [names for names in by_child.values() if len(names) > 1]
    assert shared == [{"litert", "litert-fp16", "litert-dynamic-int8", "litert-int8"}]
    for names in by_child.values():
        entries = [RUNTIMES[name] for name in names]
        assert (
            len({(r.engine, r.environment, r.keras_backend, r.per_session) for r in entries}) == 1
        )
        assert len(names) == 1 or all("runtime" in r.per_session for r in entries)
    assert (
        RunConfig(runtime="litert").forward_key() != RunConfig(runtime="litert-fp16").forward_key()
    )


def test_batch_slots_place_target_and_context():
    assert batch_slots(RunConfig(batch=1), 2, 5) == (2,)
    assert batch_slots(RunConfig(batch=4), 2, 5) == (2, 3, 4, 0)
    assert batch_slots(RunConfig(batch=4, position=2), 2, 5) == (3, 4, 2, 0)
    assert batch_slots(RunConfig(batch=7), 0, 3) == (0, 1, 2, 1, 2, 1, 2)
    assert batch_slots(RunConfig(batch=3, context="copies"), 1, 5) == (1, 1, 1)
    assert batch_slots(RunConfig(batch=3), 0, 1) == (0, 0, 0)  # a set of one: copies


def test_preprocessing_from_command_line_strings():
    assert parse_preprocessing("1/255").scale == pytest.approx(1 / 255)
    assert parse_preprocessing(None).scale is None
    assert parse_preprocessing(None, "0.5,0.4,0.3", "0.2").mean == (0.5, 0.4, 0.3)
    with pytest.raises(ConfigError, match="scale"):
        parse_preprocessing("x/y")
    with pytest.raises(ConfigError, match="std must not contain 0"):
        Preprocessing(std=(0.0,))
    assert Preprocessing.from_dict(Preprocessing(mean=(1.0,)).to_dict()) == Preprocessing(
        mean=(1.0,)
    )


def test_every_layer_name_keras_takes_can_be_kept_in_float32_and_written_in_a_spec():
    """A 300-character layer name, or one holding ``+``, ``,``, ``=`` or ``%``,
    could not be repaired ("is not a layer name"). A spec writes those characters as %XX."""
    names = ("c" * 300, "a+b", "x,y=z", "p%2Bq")
    config = RunConfig(precision="mixed_bfloat16", keep_float32=names)
    spec = config.to_spec()
    assert "keep_float32=" in spec and "a%2Bb" in spec and "x%2Cy%3Dz" in spec
    assert "p%252Bq" in spec  # a name that looks like a code is written so too
    assert parse_config_spec(spec) == config
    assert set(parse_config_spec(spec).keep_float32) == set(names)
    assert config.label().startswith("cpu b1 bf16 f32×4#")  # long names: counted, not spelt
    assert parse_config_spec("precision=bf16,keep_float32=enc1+dec/conv").keep_float32 == (
        "dec/conv",
        "enc1",
    )


def test_a_keras_2_child_sets_tensorflows_variables_and_legacy_keras_before_import():
    """runtime=tf_keras's child is TensorFlow's, as a Keras 2 user's script runs:
    its knobs' variables, ``TF_USE_LEGACY_KERAS=1``, and Keras 3 (imported beside it,
    unused for the model) on TensorFlow; oneDNN's default there is TensorFlow's."""
    keras2 = RUNTIMES["tf_keras"]
    settings = RunConfig(runtime="tf_keras", threads=1, determinism=True, onednn=False)
    assert keras2.environment(settings, False, {}) == {
        "TF_ENABLE_ONEDNN_OPTS": "0", "TF_DETERMINISTIC_OPS": "1", "TF_NUM_INTRAOP_THREADS": "1",
        "TF_USE_LEGACY_KERAS": "1",
    }  # fmt: skip
    assert keras2.keras == 2 and keras2.keras_backend == "tensorflow"
    assert keras2.tensorflow_kernels and RUNTIMES["tensorflow"].tensorflow_kernels
    assert not any(RUNTIMES[name].tensorflow_kernels for name in ("jax", "litert", "openvino"))
    assert RUNTIMES["tensorflow"].environment(RunConfig(), False, {}) == {}  # no legacy Keras
    assert RunConfig(runtime="tf_keras").label() == "tf_keras cpu b1"
