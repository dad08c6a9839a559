"""Keras on JAX: XLA as ``jax.jit`` of the model's stateless call (or op by op without it),
TF32 as the default matmul precision, weights and inputs placed on one device and checked, and
a persistent compilation cache per user (a model's loading compiles every layer's
initialiser: 9–27 s cold, a few seconds warm)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import keras
import numpy as np

from segdiff_gui.core import tf32
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.runtimes import JAX_DETERMINISM_FLAG
from segdiff_gui.engine.backends.base import Backend, Outputs, RunError, short_device
from segdiff_gui.engine.facts import cpu_model
from segdiff_gui.engine.gpu_identity import identity_for, loaded_cuda_libraries
from segdiff_gui.storage.locations import compilation_cache_problem

__all__ = ["JaxBackend"]


def _short(device: Any) -> str:
    return short_device(device.platform, device.id)


_CACHE_BYTES = 2 << 30  # JAX evicts the least recently used entries past this


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def _platform_devices(platform: str) -> list[Any]:
    try:
        return list(jax.devices(platform))
    except RuntimeError:  # no such platform in this jaxlib, or JAX_PLATFORMS leaves it out
        return []


def _x64(config: RunConfig) -> contextlib.AbstractContextManager[Any]:
    """JAX's 64-bit values for the exact reference, for its run only: without them
    JAX makes every float64 array float32. Only within this context, so a float32 run of the
    same child computes as in any other; its state is part of every jit's cache key."""
    return jax.enable_x64(True) if config.is_exact else contextlib.nullcontext()


class JaxBackend(Backend):
    name = "jax"

    def __init__(self) -> None:
        self._jitted: dict[tuple[object, ...], Any] = {}
        self._ran = "nothing yet"  # how the last forward pass ran, for its run's provenance
        self._layer_jits: dict[tuple[object, ...], Any] = {}
        self._cache_refused = ""  # why the compilation cache was not used

    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        # A fresh process must choose its kernels again: the persistent cache would hand it
        # the executables (GPU autotuning's choices inside) that an earlier process compiled.
        # A folder that cannot be made only costs the speed-up; one that is not the user's
        # own is not used (a compiled executable runs as it is, unchecked).
        self._cache_refused = compilation_cache_problem(compiled_dir)
        if settings.repeat_scope != "fresh" and not self._cache_refused and _writable(compiled_dir):
            jax.config.update("jax_compilation_cache_dir", str(compiled_dir))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
            jax.config.update("jax_compilation_cache_max_size", _CACHE_BYTES)
        # TF32 off: float32 matmuls and convolutions at full precision. JAX's default lets a
        # GPU use TF32; the setting is part of every jit's cache key.
        jax.config.update("jax_default_matmul_precision", None if settings.tf32 else "highest")

    def _device(self, name: str) -> Any:
        if name.startswith("gpu"):
            index = int(name.split(":")[1])
            found = _platform_devices("gpu")
            if index >= len(found):
                raise RunError(f"{name} requested but JAX sees {len(found)} GPU(s)")
            return found[index]
        return _platform_devices("cpu")[0]

    def device_scope(self, device: str) -> Any:
        return jax.default_device(self._device(device))

    def devices(self) -> list[dict[str, Any]]:
        devices: list[dict[str, Any]] = [
            {"name": "cpu", "type": "CPU", "description": cpu_model(), "compute_capability": []}
        ]
        for device in _platform_devices("gpu"):
            capability = str(getattr(device, "compute_capability", "") or "")
            devices.append(
                {
                    "name": _short(device),
                    "type": "GPU",
                    "description": str(device.device_kind),
                    "compute_capability": [int(p) for p in capability.split(".") if p.isdigit()],
                    "identity": identity_for(str(device.device_kind), int(device.id)),
                }
            )
        return devices

    def facts(self) -> dict[str, Any]:
        flags = os.environ.get("XLA_FLAGS", "")
        return {
            "runtime_version": jax.__version__,
            "jax_version": jax.__version__,
            "jaxlib_version": getattr(jaxlib, "__version__", ""),
            "jax_platforms": sorted({d.platform for d in jax.devices()}),
            "cuda_loaded": loaded_cuda_libraries(),
            "xla_flags": flags,
            "onednn_enabled": False,
            "op_determinism": JAX_DETERMINISM_FLAG in flags,
            "intra_op_threads": 1 if "intra_op_parallelism_threads=1" in flags else 0,
            "compilation_cache": str(getattr(jax.config, "jax_compilation_cache_dir", "") or ""),
            **({"compilation_cache_refused": self._cache_refused} if self._cache_refused else {}),
        }

    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        with _x64(config):  # the exact reference's weights are created as float64
            keras_model = model.model_for(config.precision, config.keep_float32)
        device = self._device(config.device)
        names = model.output_names
        if config.xla:
            key = (id(keras_model), config.forward_key())
            if key not in self._jitted:

                def stateless(trainable: Any, other: Any, batch: Any) -> Any:
                    outputs, _ = keras_model.stateless_call(trainable, other, batch, training=False)
                    return outputs

                self._jitted[key] = jax.jit(stateless)
            jitted = self._jitted[key]

            def call(batch: Any) -> Any:
                # The weights are passed in as they lie: a jit with weights on one device and
                # inputs on another would move them silently, so both are checked.
                trainable = [w.value for w in keras_model.trainable_variables]
                other = [w.value for w in keras_model.non_trainable_variables]
                outputs = jitted(trainable, other, batch)
                # Read back: the computation that ran is one of the jit's compiled ones.
                self._ran = f"one XLA computation (jax.jit, {jitted._cache_size()} compiled)"
                return outputs

        else:

            def call(batch: Any) -> Any:
                with jax.default_device(device):
                    outputs = keras_model(batch, training=False)
                self._ran = "op by op"
                return outputs

        def run(batch: np.ndarray) -> Outputs:
            with _x64(config):
                outputs = model.output_list(call(jax.device_put(batch, device)), names)
            return Outputs(
                [np.asarray(output) for output in outputs],
                tuple(",".join(sorted(_short(d) for d in output.devices())) for output in outputs),
                tuple(str(output.dtype) for output in outputs),
            )

        return run

    def tf32_operand(self, value: Any) -> Any:
        array = jnp.asarray(value)
        return tf32_rounded(array) if array.dtype == jnp.float32 else value

    def layer_call(
        self, config: RunConfig
    ) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
        """With XLA, one ``jax.jit`` per layer of its stateless call (its weights passed in, as
        the whole model's jit takes them); without, the layer op by op."""
        if not config.xla:
            return super().layer_call(config)

        def call(layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            key = (id(layer), config.forward_key())
            if not getattr(layer, "_call_has_training_arg", False):
                # Layer.__call__ drops it for such a layer; stateless_call hands it on to call().
                kwargs = {name: value for name, value in kwargs.items() if name != "training"}
            if key not in self._layer_jits:

                def stateless(trainable: Any, other: Any, *inputs: Any) -> Any:
                    outputs, _ = layer.stateless_call(trainable, other, *inputs, **kwargs)
                    return outputs

                self._layer_jits[key] = jax.jit(stateless)
            trainable = [w.value for w in layer.trainable_variables]
            other = [w.value for w in layer.non_trainable_variables]
            return self._layer_jits[key](trainable, other, *args)

        return call

    def probe_input(self, batch: np.ndarray, config: RunConfig) -> Any:
        return jax.device_put(batch, self._device(config.device))

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        weights = model.model_for(config.precision, config.keep_float32).weights
        return {_short(d) for w in weights for d in w.value.devices()}

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        precision = getattr(jax.config, "jax_default_matmul_precision", None)
        return {
            "tf32_enabled": precision != "highest",
            "matmul_precision": str(precision or "default"),
            "placement": f"{self._ran} on {config.device}",  # as the forward pass ran
            "keras_backend": keras.backend.backend(),
        }


def tf32_rounded(values: jax.Array) -> jax.Array:
    """``values`` (float32) rounded to TF32 as ``core/tf32.to_tf32`` does, in JAX's integer ops
    on the bits (they compile under ``jax.jit``)."""
    bits = jax.lax.bitcast_convert_type(values, jnp.int32)
    exponent = jnp.int32(tf32.EXPONENT_BITS)
    finite = (bits & exponent) != exponent
    # Ties away from zero; a finite value never overflows an int32.
    added = jnp.where(finite, bits + jnp.int32(tf32.HALF_ULP), bits)
    kept = added & jnp.int32(tf32.signed(tf32.KEPT_BITS))
    quiet = kept | jnp.int32(tf32.QUIET_NAN_BIT)
    return jax.lax.bitcast_convert_type(jnp.where(jnp.isnan(values), quiet, kept), jnp.float32)


BACKEND = JaxBackend
