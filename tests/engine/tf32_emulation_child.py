"""A child for tests/engine/test_tf32_emulation.py (TensorFlow never enters pytest's process):
``python tf32_emulation_child.py BITS.npy OUT.npz``.

It rounds the float32 patterns of BITS.npy with the emulation's TensorFlow ops, eagerly and
inside ``tf.function`` with and without XLA, and calls one layer of each kind under the
emulation beside the same op on operands rounded beforehand by numpy's ``core/tf32``: a layer
whose op is rounded equals the latter bit for bit, one left alone equals its plain call.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from segdiff_gui.core.tf32 import to_tf32  # noqa: E402
from segdiff_gui.engine.tf32_emulation import emulating, tf32_rounded  # noqa: E402


def _rounded_by_tensorflow(bits: np.ndarray) -> dict[str, np.ndarray]:
    values = tf.constant(bits.view(np.float32))
    graph = tf.function(tf32_rounded, jit_compile=False)
    xla = tf.function(tf32_rounded, jit_compile=True)
    return {
        name: np.asarray(result).view(np.uint32)
        for name, result in (
            ("eager", tf32_rounded(values)),
            ("graph", graph(values)),
            ("xla", xla(values)),
        )
    }


def _layers() -> dict[str, bool]:
    """Per layer kind: whether its emulated call is what the rounding says it is."""
    rng = np.random.default_rng(36)
    image = rng.standard_normal((1, 9, 9, 3)).astype(np.float32)
    vector = rng.standard_normal((2, 7)).astype(np.float32)
    r = to_tf32
    found: dict[str, bool] = {}

    def call(layer: keras.layers.Layer, x: np.ndarray, emulate: str) -> np.ndarray:
        with emulating(emulate) as tally:
            out = tf.function(lambda t: layer(t))(tf.constant(x))
        found[f"{type(layer).__name__} traced"] = bool(tally) or emulate == "off"
        return np.asarray(out)

    dense = keras.layers.Dense(5, use_bias=False)
    dense.build(vector.shape)
    kernel = np.asarray(dense.kernel)
    expected = np.asarray(tf.matmul(r(vector), r(kernel)))
    found["Dense rounded"] = np.array_equal(call(dense, vector, "tf32"), expected)
    found["Dense plain when off"] = np.array_equal(
        call(dense, vector, "off"), np.asarray(tf.matmul(vector, kernel))
    )

    conv = keras.layers.Conv2D(4, 3, use_bias=False)
    conv.build(image.shape)
    kernel = np.asarray(conv.kernel)
    expected = np.asarray(tf.nn.convolution(r(image), r(kernel), padding="VALID"))
    found["Conv2D rounded"] = np.array_equal(call(conv, image, "tf32"), expected)

    transpose = keras.layers.Conv2DTranspose(2, 3, use_bias=False)
    transpose.build(image.shape)
    kernel = np.asarray(transpose.kernel)
    expected = np.asarray(
        tf.nn.conv_transpose(r(image), r(kernel), (1, 11, 11, 2), 1, padding="VALID")
    )
    found["Conv2DTranspose rounded"] = np.array_equal(call(transpose, image, "tf32"), expected)

    depthwise = keras.layers.DepthwiseConv2D(3, use_bias=False)
    depthwise.build(image.shape)
    found["DepthwiseConv2D left alone"] = np.array_equal(
        call(depthwise, image, "tf32"), call(depthwise, image, "off")
    )

    separable = keras.layers.SeparableConv2D(4, 3, use_bias=False)
    separable.build(image.shape)
    spatial = tf.nn.depthwise_conv2d(image, separable.depthwise_kernel, (1, 1, 1, 1), "VALID")
    pointwise = r(np.asarray(separable.pointwise_kernel))
    expected = np.asarray(tf.nn.convolution(r(np.asarray(spatial)), pointwise, padding="VALID"))
    found["SeparableConv2D pointwise rounded"] = np.array_equal(
        call(separable, image, "tf32"), expected
    )

    einsum = keras.layers.EinsumDense("ab,bc->ac", output_shape=5)
    einsum.build(vector.shape)
    expected = np.asarray(tf.einsum("ab,bc->ac", r(vector), r(np.asarray(einsum.kernel))))
    found["EinsumDense rounded"] = np.array_equal(call(einsum, vector, "tf32"), expected)
    return found


def main() -> None:
    bits = np.load(sys.argv[1])
    rounded = _rounded_by_tensorflow(bits)
    layers = _layers()
    np.savez(
        sys.argv[2],
        **rounded,
        layer_names=np.array(list(layers)),
        layer_checks=np.array(list(layers.values())),
    )


if __name__ == "__main__":
    main()
