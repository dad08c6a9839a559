"""A child for tests/engine/test_tf32_emulation.py (no runtime enters pytest's process):
``python tf32_emulation_child.py RUNTIME BITS.npy OUT.npz [SAVED_MODEL]``, RUNTIME tensorflow,
jax or torch.

It rounds the float32 patterns of BITS.npy with the runtime's TF32 rounding (eagerly, and
compiled where the runtime compiles: ``tf.function`` with and without XLA, ``jax.jit``), and
calls one layer of each kind under the emulation beside Keras's own op on operands rounded
beforehand by numpy's ``core/tf32``: a layer whose op is rounded equals the latter bit for bit,
one left alone equals its plain call. Under TensorFlow, ``SAVED_MODEL`` (a fourth argument)
is a SavedModel folder whose emulated forward pass the backend must refuse: the runner refuses
it when the runs are planned, the backend still does where planning was passed by.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

RUNTIME = sys.argv[1]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = RUNTIME
os.environ["JAX_PLATFORMS"] = "cpu"

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from segdiff_gui.core.tf32 import to_tf32  # noqa: E402
from segdiff_gui.engine.tf32_emulation import emulating  # noqa: E402

backend_module = importlib.import_module(f"segdiff_gui.engine.backends.{RUNTIME}")
BACKEND = backend_module.BACKEND()


def _compiled(values: np.ndarray) -> dict[str, object]:
    rounded = backend_module.tf32_rounded
    if RUNTIME == "tensorflow":
        import tensorflow as tf

        tensor = tf.constant(values)
        return {
            "eager": rounded(tensor),
            "graph": tf.function(rounded, jit_compile=False)(tensor),
            "xla": tf.function(rounded, jit_compile=True)(tensor),
        }
    if RUNTIME == "jax":
        import jax

        array = jax.numpy.asarray(values)
        return {"eager": rounded(array), "jit": jax.jit(rounded)(array)}
    import torch

    return {"eager": rounded(torch.from_numpy(values.copy()))}


def _bits(tensor: object) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(tensor)).view(np.uint32)


def _layers() -> dict[str, bool]:
    """Per layer kind: whether its emulated call is what the rounding says it is."""
    rng = np.random.default_rng(36)
    image = rng.standard_normal((1, 9, 9, 3)).astype(np.float32)
    vector = rng.standard_normal((2, 7)).astype(np.float32)
    found: dict[str, bool] = {}

    def r(value: object) -> np.ndarray:
        return to_tf32(np.asarray(ops.convert_to_numpy(value), dtype=np.float32))

    def call(layer: keras.layers.Layer, x: np.ndarray, emulate: str) -> np.ndarray:
        with emulating(emulate, BACKEND.tf32_operand) as tally:
            out = layer(ops.convert_to_tensor(x))
        if emulate != "off":
            found[f"{type(layer).__name__} counted"] = bool(tally)
        return np.asarray(ops.convert_to_numpy(out))

    def same(first: object, second: object) -> bool:
        return np.array_equal(_bits(first), _bits(second))

    dense = keras.layers.Dense(5, use_bias=False)
    dense.build(vector.shape)
    found["Dense rounded"] = same(
        call(dense, vector, "tf32"), ops.matmul(r(vector), r(dense.kernel))
    )
    found["Dense plain when off"] = same(
        call(dense, vector, "off"), ops.matmul(vector, ops.convert_to_numpy(dense.kernel))
    )
    conv = keras.layers.Conv2D(4, 3, use_bias=False)
    conv.build(image.shape)
    found["Conv2D rounded"] = same(call(conv, image, "tf32"), ops.conv(r(image), r(conv.kernel)))
    transpose = keras.layers.Conv2DTranspose(2, 3, use_bias=False)
    transpose.build(image.shape)
    found["Conv2DTranspose rounded"] = same(
        call(transpose, image, "tf32"), ops.conv_transpose(r(image), r(transpose.kernel), 1)
    )
    depthwise = keras.layers.DepthwiseConv2D(3, use_bias=False)
    depthwise.build(image.shape)
    found["DepthwiseConv2D left alone"] = same(
        call(depthwise, image, "tf32"), call(depthwise, image, "off")
    )
    separable = keras.layers.SeparableConv2D(4, 3, use_bias=False)
    separable.build(image.shape)
    spatial = ops.depthwise_conv(image, separable.depthwise_kernel, 1)
    found["SeparableConv2D: depthwise left alone, pointwise rounded"] = same(
        call(separable, image, "tf32"), ops.conv(r(spatial), r(separable.pointwise_kernel))
    )
    einsum = keras.layers.EinsumDense("ab,bc->ac", output_shape=5)
    einsum.build(vector.shape)
    found["EinsumDense rounded"] = same(
        call(einsum, vector, "tf32"), ops.einsum("ab,bc->ac", r(vector), r(einsum.kernel))
    )
    # Compiled (XLA under TensorFlow, jax.jit): the layer traced under the emulation equals
    # the same compiler's op on operands rounded beforehand, so no rewrite of the compiled
    # graph skips or moves the rounding.
    compile_ = _compiler()
    if compile_ is not None:
        for layer, x, op in (
            (conv, image, lambda a, k: ops.conv(a, k)),
            (dense, vector, lambda a, k: ops.matmul(a, k)),
        ):
            with emulating("tf32", BACKEND.tf32_operand):
                emulated = compile_(lambda t, layer=layer: layer(t))(ops.convert_to_tensor(x))
            rounded = compile_(op)(
                ops.convert_to_tensor(r(x)), ops.convert_to_tensor(r(layer.kernel))
            )
            found[f"{type(layer).__name__} rounded when compiled"] = same(emulated, rounded)
    return found


def _compiler() -> Any:
    """How the runtime compiles a function with XLA (None for PyTorch, which runs eagerly)."""
    if RUNTIME == "tensorflow":
        import tensorflow as tf

        return lambda function: tf.function(function, jit_compile=True)
    if RUNTIME == "jax":
        import jax

        return jax.jit
    return None


def _saved_model_refusal(path: str) -> str:
    """What the backend says when asked for an emulated forward pass of a SavedModel."""
    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.core.errors import InputError
    from segdiff_gui.engine.models import load_model

    try:
        BACKEND.forward(load_model(path, trust=True), RunConfig(emulate="tf32"))
    except InputError as error:
        return str(error)
    return "not refused"


def main() -> None:
    bits = np.load(sys.argv[2])
    rounded = {name: _bits(value) for name, value in _compiled(bits.view(np.float32)).items()}
    if RUNTIME == "torch":
        import torch

        with torch.inference_mode():
            layers = _layers()
    else:
        layers = _layers()
    refused = {}
    if len(sys.argv) > 4:
        refused["saved_model_refusal"] = np.array(_saved_model_refusal(sys.argv[4]))
    np.savez(
        sys.argv[3],
        **rounded,
        **refused,
        layer_names=np.array(list(layers)),
        layer_checks=np.array(list(layers.values())),
    )


if __name__ == "__main__":
    main()
