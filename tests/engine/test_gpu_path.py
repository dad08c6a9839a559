"""The GPU path, right by construction, shown without a GPU: with
JAX's forced host devices (several CPU devices in one process), TensorFlow's own errors on a
machine without the device asked for, a fake ``nvidia-smi``, and real children whose first
forward pass is slowed down. What only a real GPU can show is left to one."""

import json
import os
import textwrap
from pathlib import Path

import pytest
from PIL import Image

from segdiff_gui.core.config import RunConfig
from segdiff_gui.runner import plan_matrix
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff
from tests.factories import engine_script

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jax_child(models, tmp_path_factory) -> dict:
    """One JAX child, with two forced host devices, answers every JAX test of this module (a
    JAX interpreter is seconds of CPU): what ``check_placement`` says of weights loaded on
    each device, and where the compilation cache is set (the XLA flag it forces is known)."""
    model = models / "tiny.keras"
    folder = tmp_path_factory.mktemp("jax")
    blocked = folder / "file"
    blocked.write_text("not a folder")
    seen = engine_script(
        f"""
        import json, os
        os.environ["KERAS_BACKEND"] = "jax"
        import jax
        from pathlib import Path
        from segdiff_gui.core.config import RunConfig
        from segdiff_gui.engine.backends.base import RunError
        from segdiff_gui.engine.backends.jax import JaxBackend
        from segdiff_gui.engine.environment import xla_knows
        from segdiff_gui.engine.models import load_model
        from segdiff_gui.engine.worker import check_placement

        backend = JaxBackend()
        with jax.default_device(jax.devices("cpu")[1]):
            second = load_model({str(model)!r})
        with backend.device_scope("cpu"):
            first = load_model({str(model)!r})
        try:
            check_placement(RunConfig(), "cpu:0", backend.weight_devices(second, RunConfig()))
            refused = ""
        except RunError as error:
            refused = str(error)

        def cache_after(config, folder):
            jax.config.update("jax_compilation_cache_dir", None)
            JaxBackend().configure(config, [], Path(folder))
            return jax.config.jax_compilation_cache_dir

        print(json.dumps({{
            "devices": len(jax.devices("cpu")),
            "second": sorted(backend.weight_devices(second, RunConfig())),
            "first": sorted(backend.weight_devices(first, RunConfig())),
            "refused": refused,
            "knows": xla_knows("--xla_gpu_deterministic_ops=true"),
            "bogus": xla_knows("--xla_no_such_flag=1"),
            "process": cache_after(RunConfig(runtime="jax"), {str(folder / "jax")!r}),
            "fresh": cache_after(
                RunConfig(runtime="jax", repeat_scope="fresh"), {str(folder / "fresh")!r}
            ),
            "blocked": cache_after(RunConfig(runtime="jax"), {str(blocked / "jax")!r}),
        }}))
        """,
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_PLATFORMS="cpu",
    )
    return {**seen, "folder": str(folder)}


def test_weights_on_another_device_are_refused_not_read_through_a_copy(jax_child):
    """With two forced host devices: a model loaded in one device's scope has its
    weights there, and a run whose weights are elsewhere is refused."""
    seen = jax_child
    assert seen["devices"] == 2
    assert seen["second"] == ["cpu:1"] and seen["first"] == ["cpu:0"]
    assert seen["refused"] == (
        "cpu requested but the model's weights live on cpu:1; not computing across devices"
    )


_SLOW_TRACE = """
# A layer whose Python sleeps only while tf.function traces the forward pass (once per batch
# shape, as kernels compile), never while Keras rebuilds the model on load. A lambda: Keras
# keeps its code in the file (loaded only when trusted).
slow = lambda x: (  # noqa: E731
    __import__("time").sleep(13) if type(x).__name__ != "KerasTensor" else None, x
)[1]
inputs = keras.Input((16, 16, 1))
traced = keras.layers.Lambda(slow, output_shape=(16, 16, 1), name="slow_trace")(inputs)
outputs = keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(traced)
keras.Model(inputs, outputs).save(slow_trace_path)
"""


@pytest.fixture(scope="module")
def tensorflow_child(demo, tmp_path_factory) -> dict:
    """One TensorFlow child answers every TensorFlow question of this module (a TensorFlow
    interpreter is seconds of CPU): a forward pass on a GPU this machine lacks, TensorFlow's
    own determinism and out-of-memory errors explained, and the slow-tracing model saved."""
    model, _ = demo
    slow_trace = tmp_path_factory.mktemp("slow-trace") / "slow_trace.keras"
    seen = engine_script(
        textwrap.dedent(
            f"""
            import json, os
            os.environ["KERAS_BACKEND"] = "tensorflow"
            import keras
            import numpy as np
            import tensorflow as tf
            from segdiff_gui.core.config import RunConfig
            from segdiff_gui.engine.backends.tensorflow import TensorFlowBackend
            from segdiff_gui.engine.models import load_model

            slow_trace_path = {str(slow_trace)!r}
            """
        )
        + _SLOW_TRACE
        + textwrap.dedent(
            f"""
            backend = TensorFlowBackend()
            unimplemented = tf.errors.UnimplementedError(
                None, None, "Deterministic GPU implementation of ScatterNd not available"
            )
            oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
            determinism = backend.explain(
                unimplemented, RunConfig(device="gpu:0", determinism=True, xla=True)
            )
            oom = backend.explain(oom, RunConfig(device="gpu:0", batch=64))

            backend = TensorFlowBackend()
            backend._logical = {{"gpu:0": 0}}  # as if this child had opened a GPU
            config = RunConfig(device="gpu:0")
            forward = backend.forward(load_model({str(model)!r}), config)
            try:
                forward(np.zeros((1, 256, 256, 1), np.float32))
                said = "ran"
            except Exception as error:
                said = backend.explain(error, config) or repr(error)
            print(json.dumps({{"said": said, "determinism": determinism, "oom": oom}}))
            """
        )
    )
    return {**seen, "slow_trace": str(slow_trace)}


def test_an_op_without_a_kernel_on_the_device_is_named_not_run_elsewhere(tensorflow_child):
    """Soft placement is off for the run, so what has no kernel on the device asked
    for (here: a GPU this machine lacks; with soft placement on, TensorFlow quietly ran it
    on the CPU) is refused in one line, not run elsewhere."""
    assert tensorflow_child["said"] == (
        "the model cannot run on gpu:0 in this TensorFlow (it has kernels for: CPU); it would "
        "have run on the CPU, and segdiff does not fall back silently"
    )


def test_determinism_xla_and_memory_failures_are_one_line_with_the_remedy(tensorflow_child):
    """TensorFlow's UnimplementedError under determinism (with XLA, Keras's
    own warning) and an out-of-memory at a batch, as TensorFlow raises them."""
    seen = tensorflow_child
    assert seen["determinism"].startswith(
        "TensorFlow has no deterministic kernel for an op of this model (Deterministic GPU "
        "implementation of ScatterNd not available); run it without op determinism "
        "(determinism=off) or without XLA (xla=off)"
    )
    assert seen["oom"].startswith("out of memory on gpu:0 at batch 64")
    assert "choose a smaller batch" in seen["oom"]


def test_a_long_first_compilation_says_so_instead_of_timing_out(
    tensorflow_child, small_images, tmp_path
):
    """A first forward pass that takes longer than the no-progress deadline (a
    GPU's PTX compiling) keeps the child alive by saying "compiling kernels", often enough
    for the deadline given (a heartbeat every 15 s never saved a 9 s compilation
    under --timeout 6)."""
    model = tensorflow_child["slow_trace"]
    small = []
    for index, image in enumerate(small_images[:2]):  # the model takes 16×16
        small.append(tmp_path / f"s{index}.png")
        Image.open(image).crop((0, 0, 16, 16)).save(small[-1])
    # A 13 s trace under a 10 s deadline. The deadline also bounds TensorFlow's import, which
    # took up to 8 s on two busy cores: a deadline of 6 s then killed the child before it ran.
    result = segdiff(
        "run", model, *small, "--config", "batch=2", "--repeats", "1", "--timeout", "10",
        "--trust-model", "--cache", tmp_path / "cache", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "timed out" not in result.stderr
    assert [run["status"] for run in json.loads(result.stdout)["runs"]] == ["finished"]


def test_gpus_are_named_by_uuid_memory_and_driver_from_nvidia_smi(tmp_path):
    """Identity beyond an index, from the driver's own tool (faked here)."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo '0, GPU-1b2c3d4e-aaaa-bbbb-cccc-123456789abc, NVIDIA H200, 143771, 580.65.06, "
        "9.0, 00000000:19:00.0'\n"
        "echo '1, GPU-99999999-aaaa-bbbb-cccc-123456789abc, NVIDIA H200, 143771, 580.65.06, "
        "9.0, 00000000:3B:00.0'\n"
    )
    fake.chmod(0o755)
    seen = engine_script(
        """
        import json
        from segdiff_gui.engine.gpu_identity import gpu_identities, identity_for
        print(json.dumps({
            "all": gpu_identities(),
            "second": identity_for("NVIDIA H200", 1),
            "by_bus": identity_for(pci_bus_id="0000:19:00.0"),
        }))
        """,
        PATH=f"{tmp_path}:{os.environ['PATH']}",
    )
    assert [gpu["uuid"][:12] for gpu in seen["all"]] == ["GPU-1b2c3d4e", "GPU-99999999"]
    first = seen["all"][0]
    assert (first["memory_mib"], first["driver"], first["compute_capability"]) == (
        143771, "580.65.06", "9.0"
    )  # fmt: skip
    assert seen["second"]["uuid"].startswith("GPU-9999") and seen["by_bus"] == first


def test_tf32_and_autotuning_never_share_a_child(demo, tmp_path):
    """TF32 is read once per process, so a tf32=off run never reuses an algorithm
    chosen under tf32=on; the autotuning variables are keyed."""
    model, images = demo
    cache = ResultCache(tmp_path / "cache")
    configs = [RunConfig(device="gpu:0"), RunConfig(device="gpu:0", tf32=False)]
    plan = plan_matrix(model, images[:1], configs, cache=cache, repeats=1)
    assert len(plan.jobs) == 2
    os.environ["TF_CUDNN_USE_AUTOTUNE"] = "0"
    try:
        other = plan_matrix(model, images[:1], configs, cache=cache, repeats=1)
    finally:
        del os.environ["TF_CUDNN_USE_AUTOTUNE"]
    assert not {r.key for r in plan.runs} & {r.key for r in other.runs}


def test_jax_flags_and_its_compilation_cache_are_set_only_where_they_work(jax_child):
    """An unknown XLA flag aborts jaxlib, so a flag is set only once jaxlib is seen to know
    it; repeats in fresh processes get no persistent cache (it would hand them an earlier
    process's kernel choices), and a cache folder that cannot be made costs only speed."""
    seen = jax_child
    assert seen["knows"] is True and seen["bogus"] is False
    assert seen["process"] == str(Path(seen["folder"]) / "jax")
    assert seen["fresh"] is None and seen["blocked"] is None
