"""Keras on TensorFlow: ``tf.function`` with XLA set explicitly, one child's GPUs only, memory
growth, TF32 per process, and every op on the device asked for (soft placement off)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from segdiff_gui.core import tf32
from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import Backend, Outputs, RunError, short_device
from segdiff_gui.engine.backends.tf_float64 import float64_refusal
from segdiff_gui.engine.facts import cpu_model
from segdiff_gui.engine.gpu_identity import identity_for, loaded_cuda_libraries
from segdiff_gui.engine.models import layer_paths

__all__ = ["TensorFlowBackend"]

_UNPLACEABLE = re.compile(r"Cannot assign a device for operation ([^\s:]+)")
_UNSATISFIED = re.compile(r"Could not satisfy (?:explicit )?device specification '([^']+)'")
_SUPPORTED = re.compile(r"Supported device types \[([^\]]*)\]")


def _index(device: Any) -> int:
    return int(device.name.rsplit(":", 1)[-1])


def _short(tf_name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:0`` → ``gpu:0`` (a logical index)."""
    kind, _, index = tf_name.rsplit("device:", 1)[-1].partition(":")
    return short_device(kind, index)


@contextlib.contextmanager
def _hard_placement() -> Iterator[None]:
    """Soft placement off: an op with no kernel on the device asked for is an error naming
    it, not a quiet fall-back to the CPU."""
    previous = tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(False)
    try:
        yield
    finally:
        tf.config.set_soft_device_placement(previous)


@contextlib.contextmanager
def _placed(where: str) -> Iterator[None]:
    with tf.device(where), _hard_placement():
        yield


def _calling(layer: Any) -> Callable[..., Any]:
    """A plain function calling ``layer`` (tf.function wraps functions, not Keras layers)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return layer(*args, **kwargs)

    return call


class TensorFlowBackend(Backend):
    name = "tensorflow"
    answers_for_inspection = True  # inspection and device probes are TensorFlow's

    def __init__(self) -> None:
        self._functions: dict[tuple[Any, ...], Any] = {}  # per model or layer
        # This child's GPUs by their physical names ("gpu:1") → TensorFlow's logical index:
        # a child sees only the GPUs its runs use, numbered from 0.
        self._logical: dict[str, int] = {}

    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        # All of these must happen before the first op initialises the runtime.
        if settings.threads:
            tf.config.threading.set_intra_op_parallelism_threads(settings.threads)
        if settings.determinism:
            tf.config.experimental.enable_op_determinism()
        physical = tf.config.list_physical_devices("GPU")
        used = [device for device in physical if short_device("GPU", _index(device)) in gpus]
        # A CPU-only child opens no GPU at all; a GPU child only its own: TensorFlow would
        # otherwise take nearly all memory of every visible GPU.
        with contextlib.suppress(ValueError, RuntimeError):  # no GPU support in this build
            tf.config.set_visible_devices(used, "GPU")
        for device in used:
            tf.config.experimental.set_memory_growth(device, True)
        self._logical = {short_device("GPU", _index(d)): i for i, d in enumerate(used)}
        # TF32 per process: the autotuner's cache is keyed without it.
        tf.config.experimental.enable_tensor_float_32_execution(settings.tf32)

    def _tf_device(self, device: str) -> str:
        if device.startswith("gpu"):
            return f"/GPU:{self._logical.get(device, -1)}"
        return "/CPU:0"

    def _physical(self, tf_name: str) -> str:
        name = _short(tf_name)
        if name.startswith("gpu"):
            by_logical = {index: physical for physical, index in self._logical.items()}
            return by_logical.get(int(name.split(":")[1]), f"{name} (logical)")
        return name

    def device_scope(self, device: str) -> contextlib.AbstractContextManager[Any]:
        return tf.device(self._tf_device(device))

    def devices(self) -> list[dict[str, Any]]:
        devices = []
        for device in tf.config.list_physical_devices():
            if device.device_type not in ("CPU", "GPU"):
                continue
            entry: dict[str, Any] = {
                "name": "cpu",
                "tf_name": device.name,
                "type": device.device_type,
                "description": cpu_model(),
                "compute_capability": [],
            }
            if device.device_type == "GPU":
                details: dict[str, Any] = {}
                with contextlib.suppress(Exception):
                    details = dict(tf.config.experimental.get_device_details(device))
                entry["name"] = short_device("GPU", _index(device))
                entry["description"] = str(details.get("device_name", ""))
                entry["compute_capability"] = list(details.get("compute_capability", ()) or ())
                entry["identity"] = identity_for(entry["description"], _index(device))
            devices.append(entry)
        return devices

    def facts(self) -> dict[str, Any]:
        from tensorflow.python.framework import config as tf_config

        build = tf.sysconfig.get_build_info()
        return {
            "tf_version": tf.__version__,
            "runtime_version": tf.__version__,
            "cuda_build": bool(build.get("is_cuda_build", False)),
            "cuda_version": str(build.get("cuda_version", "")),
            "cudnn_version": str(build.get("cudnn_version", "")),
            "cuda_loaded": loaded_cuda_libraries(),
            "onednn_enabled": _onednn_enabled(),
            # TF has no public getter; the private one is what enable_op_determinism sets.
            "op_determinism": bool(tf_config.is_op_determinism_enabled()),
            "intra_op_threads": int(tf.config.threading.get_intra_op_parallelism_threads()),
            # The GPUs this child opened (none for a CPU-only one), each growing its memory.
            "visible_gpus": [
                short_device("GPU", _index(d)) for d in tf.config.get_visible_devices("GPU")
            ],
            "memory_growth": all(
                tf.config.experimental.get_memory_growth(d)
                for d in tf.config.get_visible_devices("GPU")
            ),
        }

    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        """One ``tf.function`` per model and forward key (its precision, XLA, …). XLA is set
        as the run computes it (``model.predict``'s choice, resolved by the planner, or the
        user's), never left to Keras inside the child."""
        key = (id(model), config.forward_key())
        if config.emulate != "off" and model.keras_model is None:
            raise tf32.saved_model_refuses_emulation(model.path, config.emulate)
        if key not in self._functions:
            self._functions[key] = tf.function(
                model.forward(config.precision, config.keep_float32), jit_compile=config.xla
            )
        function = self._functions[key]
        where = self._tf_device(config.device)

        def run(batch: np.ndarray) -> Outputs:
            with tf.device(where), _hard_placement():
                try:
                    outputs = function(tf.constant(batch))
                except Exception as error:
                    if config.is_exact and (
                        said := self._float64_refusal(model, batch, config, error)
                    ):
                        raise RunError(said) from error
                    raise
            return Outputs(
                [output.numpy() for output in outputs],
                tuple(self._physical(output.device) for output in outputs),
                tuple(output.dtype.name for output in outputs),
            )

        return run

    def _float64_refusal(
        self, model: Any, batch: np.ndarray, config: RunConfig, error: BaseException
    ) -> str:
        """An exact run's failure as the layer and op without a float64 kernel, or ""."""
        if model.keras_model is None:
            return ""
        rebuilt = model.model_for(config.precision)
        paths = dict(layer_paths(rebuilt))  # a rebuilt layer keeps its name
        return float64_refusal(
            rebuilt,
            tf.constant(batch),
            config.device,
            "GPU" if config.is_gpu else "CPU",
            lambda layer: paths.get(id(layer), layer.name),
            error,
        )

    def layer_call(
        self, config: RunConfig
    ) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
        """One ``tf.function`` per layer, with XLA as ``config`` says: each layer's graph is
        optimised as it is inside the whole model's (a Conv2D's bias and activation fused), so
        only fusions across layers could differ, which the probe's final check would show."""

        def call(layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            key = (id(layer), "layer", config.forward_key())
            if key not in self._functions:
                self._functions[key] = tf.function(_calling(layer), jit_compile=config.xla)
            return self._functions[key](*args, **kwargs)

        return call

    def probe_scope(self, config: RunConfig) -> contextlib.AbstractContextManager[Any]:
        return _placed(self._tf_device(config.device))

    def probe_input(self, batch: np.ndarray, config: RunConfig) -> Any:
        return tf.constant(batch)

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        if model.keras_model is None:  # a SavedModel's variables belong to its loaded object
            variables = getattr(model.owner, "variables", ())
            return {self._physical(v.device) for v in variables}
        keras_model = model.model_for(config.precision, config.keep_float32)
        return {self._physical(weight.value.device) for weight in keras_model.weights}

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        return {
            "tf32_enabled": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
            "placement": f"every op on {config.device} (soft placement off)",
            "keras_backend": keras.backend.backend(),
        }

    def tf32_operand(self, value: Any) -> Any:
        if isinstance(value, tf.SparseTensor | tf.IndexedSlices):
            return value
        tensor = tf.convert_to_tensor(value)
        return tf32_rounded(tensor) if tensor.dtype == tf.float32 else value

    def explain(self, error: BaseException, config: RunConfig) -> str | None:
        text = str(error)
        under = " under op determinism" if config.determinism else ""
        if match := _UNPLACEABLE.search(text):
            return (
                f"op {match.group(1)} has no {config.device} kernel in this TensorFlow{under}; "
                "it would have run on the CPU, and segdiff does not fall back silently"
            )
        if _UNSATISFIED.search(text):
            supported = _SUPPORTED.search(text)
            kinds = f" (it has kernels for: {supported.group(1)})" if supported else ""
            return (
                f"the model cannot run on {config.device} in this TensorFlow{under}{kinds}; "
                "it would have run on the CPU, and segdiff does not fall back silently"
            )
        if isinstance(error, tf.errors.UnimplementedError) and config.determinism:
            also = (
                " or without XLA (xla=off): not all ops are supported by XLA with determinism"
                if config.xla
                else ""
            )
            first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
            return (
                f"TensorFlow has no deterministic kernel for an op of this model ({first}); "
                f"run it without op determinism (determinism=off){also}"
            )
        return super().explain(error, config)


def tf32_rounded(values: tf.Tensor) -> tf.Tensor:
    """``values`` (float32) rounded to TF32 as ``core/tf32.to_tf32`` does, in TensorFlow's
    integer ops on the bits (they compile under XLA too)."""
    bits = tf.bitcast(values, tf.int32)
    exponent = tf.constant(tf32.EXPONENT_BITS, tf.int32)
    finite = tf.not_equal(tf.bitwise.bitwise_and(bits, exponent), exponent)
    # The magnitude's bits plus half a TF32 ULP: ties away from zero (a finite value never
    # overflows an int32: the largest, 0x7F7FFFFF, becomes infinity's 0x7F800FFF).
    added = tf.where(finite, bits + tf.constant(tf32.HALF_ULP, tf.int32), bits)
    kept = tf.bitwise.bitwise_and(added, tf.constant(tf32.signed(tf32.KEPT_BITS), tf.int32))
    quiet = tf.bitwise.bitwise_or(kept, tf.constant(tf32.QUIET_NAN_BIT, tf.int32))
    return tf.bitcast(tf.where(tf.math.is_nan(values), quiet, kept), tf.float32)


def _onednn_enabled() -> bool:
    """Whether oneDNN kernels are on in this process (reflects TF_ENABLE_ONEDNN_OPTS)."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


BACKEND = TensorFlowBackend
