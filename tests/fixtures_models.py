"""Builds the small models the tests load, in every format segdiff reads, in a fresh process.

Run as ``python tests/fixtures_models.py OUT_DIR``. All models share one set of weights (a tiny
fully convolutional net on 32×32×1 inputs), so the formats can be compared with each other:
- ``tiny.keras`` (Keras 3), ``tiny_tfkeras.h5`` (written by tf-keras, i.e. Keras 2),
  ``tiny_savedmodel/`` (a TensorFlow SavedModel exported by Keras 3);
- ``rgb_tfkeras.h5``: a Keras 2 model of 32×32 RGB input;
- ``lambda.keras``: a Lambda layer, which Keras safe mode refuses;
- ``broken_lambda.keras``: a Lambda that cannot be rebuilt even when trusted;
- ``logits.keras``: a linear last layer (not probabilities);
- ``two_outputs.keras``: outputs ``mask`` (sigmoid) and ``edges`` (sigmoid);
- ``softmax3.keras``: three-class softmax;
- ``nested.keras``: a backbone sub-model inside the model (precision must reach it);
- ``overflow16.keras``: weights beyond float16's range: under mixed_float16 every output is
  NaN (∞·x − ∞), under float32 a valid map.
- ``encoder_unet.keras``: a small U-Net whose encoder is a functional model of its own with two
  outputs (the skip and the bottleneck) and whose decoder block is a Sequential model, with
  batch normalisation and activations as layers of their own: the layer probe flattens both.
- ``encoder_unet_flat.keras``: the same network and weights built flat (nothing nested).
- ``erfinv.keras``: an op (erfinv) that LiteRT's builtins and tf2onnx lack: its conversion fails.
- ``default_names.keras``: twelve convolutions that keep Keras's default names (``conv2d`` …
  ``conv2d_11``), where TensorFlow's scope of one layer is another layer's name: the first
  convolution runs in scope ``conv2d_1``, and ``conv2d_1``, fused by LiteRT into the ReLU after
  it, has no tensor of its own.
- ``conv_norm.keras`` (with its weights in ``conv_norm.npz``): a convolution, batch
  normalisation with statistics that are not the initial ones, and a sigmoid: small enough to
  compute again in NumPy in float64, for the exact reference.
- ``mobilenet.keras``: a MobileNet-style encoder (a strided convolution, depthwise separable
  blocks of DepthwiseConv2D, batch normalisation and ReLU6, non-trivial statistics) with an
  upsampling head.
- ``pool3d.keras``: a MaxPooling3D over the channels, an op TensorFlow has no float64 CPU
  kernel for: the exact reference under TensorFlow is refused, naming the layer and the op.
- ``free_unet_tfkeras.h5``: a tf-keras U-Net of free input size, ``(None, None, 3)``, as most
  U-Nets are saved: converted with that size, its decoder's convolution has unknown input
  channels, which LiteRT's converter refuses.
- ``bn_unet_tfkeras.h5``: a small tf-keras U-Net on 32×32×1 with batch normalisation (moving
  statistics, scale and offset that are not the initial ones) after each convolution, its last
  layer ``foreground``: Keras 2 and Keras 3 compute its maps in other orders (tf_keras calls
  TensorFlow's fused batch normalisation, ``(x − mean) · s + β``; Keras 3
  ``tf.nn.batch_normalization``, ``x · s + (β − mean · s)``), so its maps differ by a few ULP
  between ``runtime=tf_keras`` and ``runtime=tensorflow``.
- ``tiny_tfkeras_savedmodel/``: ``tiny_tfkeras.h5``'s model saved by tf-keras as a Keras 2
  SavedModel (its layers in ``keras_metadata.pb``).
- ``lambda_tfkeras.h5``: a Keras 2 ``.h5`` whose Lambda layer creates the file
  ``lambda_tfkeras.ran`` beside it when its code runs (tf-keras loads a ``.h5`` without a
  safe mode: segdiff must refuse it before tf-keras reads it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["KERAS_BACKEND"] = "tensorflow"

import math as _fixture_math  # noqa: E402 - only broken_lambda.keras's Lambda uses it

import numpy as np  # noqa: E402


def build_keras3(out: Path) -> list[np.ndarray]:
    import keras

    keras.utils.set_random_seed(7)

    def trunk() -> tuple[keras.KerasTensor, keras.KerasTensor]:
        inputs = keras.Input((32, 32, 1), name="image")
        hidden = keras.layers.Conv2D(6, 3, padding="same", activation="relu", name="c1")(inputs)
        hidden = keras.layers.Conv2D(6, 3, padding="same", activation="relu", name="c2")(hidden)
        return inputs, hidden

    inputs, hidden = trunk()
    outputs = keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(hidden)
    tiny = keras.Model(inputs, outputs)
    tiny.save(out / "tiny.keras")
    tiny.export(str(out / "tiny_savedmodel"), verbose=False)

    inputs, hidden = trunk()
    scaled = keras.layers.Lambda(lambda t: t * 2.0, name="double")(hidden)
    keras.Model(inputs, keras.layers.Conv2D(1, 1, activation="sigmoid")(scaled)).save(
        out / "lambda.keras"
    )

    # A Lambda whose function needs a name the loading process lacks: trusted, it still cannot
    # be rebuilt, and Keras's reason is what the user must see.
    inputs, hidden = trunk()
    scaled = keras.layers.Lambda(lambda t: t * _fixture_math.pi, name="pi")(hidden)
    keras.Model(inputs, keras.layers.Conv2D(1, 1, activation="sigmoid")(scaled)).save(
        out / "broken_lambda.keras"
    )

    inputs, hidden = trunk()
    keras.Model(inputs, keras.layers.Conv2D(1, 1, name="logits")(hidden)).save(out / "logits.keras")

    inputs, hidden = trunk()
    mask = keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(hidden)
    edges = keras.layers.Conv2D(1, 1, activation="sigmoid", name="edges")(hidden)
    keras.Model(inputs, [mask, edges]).save(out / "two_outputs.keras")

    inputs, hidden = trunk()
    classes = keras.layers.Conv2D(3, 1, activation="softmax", name="classes")(hidden)
    keras.Model(inputs, classes).save(out / "softmax3.keras")

    backbone_inputs, backbone_features = trunk()
    backbone = keras.Model(backbone_inputs, backbone_features, name="backbone")
    inputs = keras.Input((32, 32, 1), name="image")
    head = keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(backbone(inputs))
    keras.Model(inputs, head).save(out / "nested.keras")

    inputs = keras.Input((32, 32, 1), name="image")
    huge = keras.layers.Conv2D(
        1, 1, activation="sigmoid", name="huge",
        kernel_initializer=keras.initializers.Constant(1e6),
        bias_initializer=keras.initializers.Constant(-1e6),
    )  # fmt: skip
    keras.Model(inputs, huge(inputs)).save(out / "overflow16.keras")

    layers = keras.layers
    encoder_inputs = keras.Input((32, 32, 1), name="image")
    skip = layers.Conv2D(4, 3, padding="same", name="conv")(encoder_inputs)
    skip = layers.BatchNormalization(name="norm")(skip)
    skip = layers.Activation("relu", name="relu")(skip)
    bottom = layers.MaxPooling2D(name="pool")(skip)
    bottom = layers.Conv2D(8, 3, padding="same", activation="relu", name="deep")(bottom)
    encoder = keras.Model(encoder_inputs, [skip, bottom], name="encoder")
    decoder_block = keras.Sequential(
        [
            keras.Input((32, 32, 12)),
            layers.Conv2D(4, 3, padding="same", name="conv"),
            layers.Activation("relu", name="relu"),
        ],
        name="decoder",
    )
    inputs = keras.Input((32, 32, 1), name="image")
    skip, bottom = encoder(inputs)
    up = layers.UpSampling2D(name="up")(bottom)
    joined = layers.Concatenate(name="join")([skip, up])
    mask = layers.Conv2D(1, 1, activation="sigmoid", name="mask")(decoder_block(joined))
    unet = keras.Model(inputs, mask)
    # Statistics that are not the initial ones, so batch normalisation computes something.
    norm = encoder.get_layer("norm")
    norm.moving_mean.assign(np.full(4, 0.1, np.float32))
    norm.moving_variance.assign(np.full(4, 0.5, np.float32))
    unet.save(out / "encoder_unet.keras")
    # The same network and weights with nothing nested: what the nested one computes.
    inputs = keras.Input((32, 32, 1), name="image")
    skip = layers.Activation("relu", name="relu")(
        layers.BatchNormalization(name="norm")(
            layers.Conv2D(4, 3, padding="same", name="conv")(inputs)
        )
    )
    bottom = layers.Conv2D(8, 3, padding="same", activation="relu", name="deep")(
        layers.MaxPooling2D(name="pool")(skip)
    )
    joined = layers.Concatenate(name="join")([skip, layers.UpSampling2D(name="up")(bottom)])
    decoded = layers.Activation("relu", name="decoder_relu")(
        layers.Conv2D(4, 3, padding="same", name="decoder_conv")(joined)
    )
    flat = keras.Model(inputs, layers.Conv2D(1, 1, activation="sigmoid", name="mask")(decoded))
    flat.set_weights(unet.get_weights())
    flat.save(out / "encoder_unet_flat.keras")

    # An op that neither LiteRT's builtins nor tf2onnx has: its conversion fails, naming it.
    inputs = keras.Input((32, 32, 1), name="image")
    odd = keras.ops.erfinv(layers.Conv2D(1, 3, padding="same", activation="tanh")(inputs) * 0.5)
    keras.Model(inputs, layers.Activation("sigmoid", name="mask")(odd)).save(out / "erfinv.keras")
    return [np.asarray(w) for w in tiny.get_weights()]


def build_exact_models(out: Path) -> None:
    import keras

    keras.utils.set_random_seed(5)
    layers = keras.layers
    rng = np.random.default_rng(5)

    inputs = keras.Input((32, 32, 1), name="image")
    conv = layers.Conv2D(1, 3, padding="same", name="conv")
    norm = layers.BatchNormalization(name="norm")
    outputs = layers.Activation("sigmoid", name="mask")(norm(conv(inputs)))
    model = keras.Model(inputs, outputs)
    norm.moving_mean.assign(np.array([0.31], np.float32))
    norm.moving_variance.assign(np.array([0.47], np.float32))
    norm.gamma.assign(np.array([1.7], np.float32))
    norm.beta.assign(np.array([-0.23], np.float32))
    model.save(out / "conv_norm.keras")
    kernel, bias = (np.asarray(w) for w in conv.get_weights())
    np.savez(
        out / "conv_norm.npz",
        kernel=kernel, bias=bias, gamma=np.asarray(norm.gamma), beta=np.asarray(norm.beta),
        mean=np.asarray(norm.moving_mean), variance=np.asarray(norm.moving_variance),
        epsilon=np.float64(norm.epsilon),
    )  # fmt: skip

    def block(hidden: keras.KerasTensor, filters: int, stride: int, name: str) -> keras.KerasTensor:
        hidden = layers.DepthwiseConv2D(3, stride, padding="same", use_bias=False,
                                        name=f"{name}_dw")(hidden)  # fmt: skip
        hidden = layers.BatchNormalization(name=f"{name}_dw_bn")(hidden)
        hidden = layers.ReLU(6.0, name=f"{name}_dw_relu")(hidden)
        hidden = layers.Conv2D(filters, 1, use_bias=False, name=f"{name}_pw")(hidden)
        hidden = layers.BatchNormalization(name=f"{name}_pw_bn")(hidden)
        return layers.ReLU(6.0, name=f"{name}_pw_relu")(hidden)

    inputs = keras.Input((32, 32, 1), name="image")
    hidden = layers.Conv2D(8, 3, 2, padding="same", use_bias=False, name="stem")(inputs)
    hidden = layers.BatchNormalization(name="stem_bn")(hidden)
    hidden = layers.ReLU(6.0, name="stem_relu")(hidden)
    hidden = block(hidden, 16, 1, "block1")
    hidden = block(hidden, 16, 2, "block2")
    hidden = layers.UpSampling2D(4, interpolation="bilinear", name="up")(hidden)
    outputs = layers.Conv2D(1, 1, activation="sigmoid", name="mask")(hidden)
    mobilenet = keras.Model(inputs, outputs)
    for layer in mobilenet.layers:
        if isinstance(layer, layers.BatchNormalization):
            size = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(0, 0.2, size).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 1.5, size).astype(np.float32))
    mobilenet.save(out / "mobilenet.keras")

    inputs = keras.Input((32, 32, 1), name="image")
    hidden = layers.Conv2D(4, 3, padding="same", name="conv")(inputs)
    hidden = layers.Reshape((32, 32, 4, 1), name="to_volume")(hidden)
    hidden = layers.MaxPooling3D((2, 2, 1), name="pool3d")(hidden)
    hidden = layers.Reshape((16, 16, 4), name="to_image")(hidden)
    hidden = layers.UpSampling2D(name="up")(hidden)
    outputs = layers.Conv2D(1, 1, activation="sigmoid", name="mask")(hidden)
    keras.Model(inputs, outputs).save(out / "pool3d.keras")


def build_default_names(out: Path) -> None:
    import keras

    keras.backend.clear_session()  # Keras's own names from the start: conv2d, conv2d_1 …
    keras.utils.set_random_seed(11)
    layers = keras.layers
    inputs = keras.Input((32, 32, 1))
    hidden = layers.Conv2D(8, 3, padding="same")(inputs)  # linear: a tensor of its own
    hidden = layers.Activation("relu")(layers.Conv2D(8, 3, padding="same")(hidden))
    skip = hidden
    hidden = layers.MaxPooling2D()(hidden)
    for _ in range(8):
        hidden = layers.Conv2D(8, 3, padding="same", activation="relu")(hidden)
    hidden = layers.Concatenate()([skip, layers.UpSampling2D()(hidden)])
    hidden = layers.Conv2D(8, 3, padding="same", activation="relu")(hidden)
    outputs = layers.Conv2D(1, 1, activation="sigmoid")(hidden)
    model = keras.Model(inputs, outputs)
    assert [layer.name for layer in model.layers if "conv" in layer.name][-1] == "conv2d_11"
    model.save(out / "default_names.keras")


def build_hostile_names(out: Path) -> None:
    """Layers named with a window-title escape, a newline that would forge the next line of
    output, and a right-to-left override (tests/hostile/test_names_through_commands.py)."""
    import keras

    inputs = keras.Input((16, 16, 1))
    hidden = keras.layers.Conv2D(
        4, 3, padding="same", activation="relu", name="conv\x1b]0;pwned\x07"
    )(inputs)
    hidden = keras.layers.Conv2D(
        4, 3, padding="same", activation="relu", name="pool\nFAIL forged line"
    )(hidden)
    outputs = keras.layers.Conv2D(1, 1, activation="sigmoid", name="out\u202egnp.exe")(hidden)
    keras.Model(inputs, outputs).save(out / "hostile_names.keras")


def build_tf_keras(out: Path, weights: list[np.ndarray]) -> None:
    import tf_keras

    inputs = tf_keras.Input((32, 32, 1), name="image")
    hidden = tf_keras.layers.Conv2D(6, 3, padding="same", activation="relu", name="c1")(inputs)
    hidden = tf_keras.layers.Conv2D(6, 3, padding="same", activation="relu", name="c2")(hidden)
    outputs = tf_keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(hidden)
    model = tf_keras.Model(inputs, outputs)
    model.set_weights(weights)
    model.save(out / "tiny_tfkeras.h5", save_format="h5")
    model.save(out / "tiny_tfkeras_savedmodel", save_format="tf")
    marker = str(out / "lambda_tfkeras.ran")
    inputs = tf_keras.Input((32, 32, 1), name="image")
    marked = tf_keras.layers.Lambda(lambda t: (open(marker, "w").close(), t)[1], name="marks")
    outputs = tf_keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(marked(inputs))
    tf_keras.Model(inputs, outputs).save(out / "lambda_tfkeras.h5", save_format="h5")
    os.remove(marker)  # its code ran here, as the model was built
    # A Keras 2 RGB model of a fixed size, as users bring them: it needs colour conversion
    # and resizing for photos that are gray, RGBA or of other sizes.
    inputs = tf_keras.Input((32, 32, 3), name="photo")
    hidden = tf_keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    outputs = tf_keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(hidden)
    tf_keras.Model(inputs, outputs).save(out / "rgb_tfkeras.h5", save_format="h5")
    # A U-Net of free input size, with tf-keras's default layer names.
    tf_keras.utils.set_random_seed(7)
    layers = tf_keras.layers
    inputs = tf_keras.Input((None, None, 3))
    skip = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    deep = layers.Conv2D(8, 3, padding="same", activation="relu")(layers.MaxPooling2D()(skip))
    joined = layers.Concatenate()([skip, layers.UpSampling2D()(deep)])
    outputs = layers.Conv2D(1, 1, activation="sigmoid")(joined)
    tf_keras.Model(inputs, outputs).save(out / "free_unet_tfkeras.h5", save_format="h5")
    build_bn_unet(tf_keras, out)


def build_bn_unet(tf_keras: Any, out: Path) -> None:
    tf_keras.utils.set_random_seed(3)
    layers = tf_keras.layers

    def block(hidden: Any, filters: int, name: str) -> Any:
        hidden = layers.Conv2D(filters, 3, padding="same", name=f"{name}_conv")(hidden)
        hidden = layers.BatchNormalization(name=f"{name}_bn")(hidden)
        return layers.Activation("relu", name=f"{name}_relu")(hidden)

    inputs = tf_keras.Input((32, 32, 1), name="image")
    skip = block(inputs, 8, "enc")
    deep = block(layers.MaxPooling2D(name="pool")(skip), 16, "mid")
    joined = layers.Concatenate(name="join")([skip, layers.UpSampling2D(name="up")(deep)])
    hidden = block(joined, 8, "dec")
    outputs = layers.Conv2D(1, 1, activation="sigmoid", name="foreground")(hidden)
    model = tf_keras.Model(inputs, outputs)
    rng = np.random.default_rng(3)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            size = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(0, 0.2, size).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 1.5, size).astype(np.float32))
            layer.gamma.assign(rng.uniform(0.5, 1.5, size).astype(np.float32))
            layer.beta.assign(rng.normal(0, 0.2, size).astype(np.float32))
    model.save(out / "bn_unet_tfkeras.h5", save_format="h5")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    build_tf_keras(out, build_keras3(out))
    build_default_names(out)
    build_exact_models(out)
    build_hostile_names(out)


if __name__ == "__main__":
    main()
