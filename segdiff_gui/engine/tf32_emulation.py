"""TF32 emulated on a CPU under Keras on TensorFlow (``emulate=tf32``, issue 36).

An Ampere or later GPU with TF32 on computes a float32 convolution or matrix multiply on its
tensor cores: each input and weight rounded to TF32 (10 mantissa bits), the products summed in
float32. Here the same ops of Keras's TensorFlow backend are wrapped, inside the child only:
while a forward pass runs under :func:`emulating`, their float32 operands are rounded to TF32
by TensorFlow's own integer ops on the bits (``tf.bitcast``), as ``core/tf32.py`` rounds them in
numpy, bit for bit, and the op itself then computes in float32 as before. The wrappers look the
switch up when a ``tf.function`` traces (every call of an emulated forward pass runs under it,
so a new batch size traces emulated too), so they compose with XLA and every batch size; a
forward pass without it calls the original op unchanged.

Rounded: ``conv`` (Conv1D/2D/3D, grouped ones too), ``conv_transpose`` (Conv*DTranspose), the
pointwise half of ``separable_conv`` (its 1×1 convolution; the depthwise half is left alone),
``matmul`` (Dense, attention's products), ``einsum`` (EinsumDense, MultiHeadAttention) and
``tensordot``. Left alone: ``depthwise_conv`` (DepthwiseConv*D) and separable convolutions'
depthwise half, which cuDNN computes without tensor cores, and everything that is not a
matrix product (batch normalisation, activations, pooling, resizing). A model that calls
TensorFlow's ops itself (a Lambda layer, a custom layer calling ``tf.matmul``) is not rounded
there: the run's provenance says how many ops of each kind were rounded.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from keras.src.backend.tensorflow import nn as keras_nn
from keras.src.backend.tensorflow import numpy as keras_numpy

from segdiff_gui.core import tf32

__all__ = ["ROUNDED_KINDS", "emulating", "summary", "tf32_rounded"]

# What a tally counts, in the words provenance uses.
ROUNDED_KINDS = {
    "conv": "convolutions",
    "conv_transpose": "transposed convolutions",
    "separable_conv": "separable convolutions' pointwise halves",
    "matmul": "matrix multiplies",
    "einsum": "einsums",
    "tensordot": "tensordots",
}
_LEFT_ALONE = "depthwise_conv"

# The tally of the forward pass being traced under emulation; None: no emulation.
_ACTIVE: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar(
    "segdiff_tf32_emulation", default=None
)
_ORIGINALS: dict[str, Callable[..., Any]] = {}


def _int32(bits: int) -> int:
    """An unsigned 32-bit pattern as the int32 TensorFlow's bitwise ops take."""
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def tf32_rounded(values: tf.Tensor) -> tf.Tensor:
    """``values`` (float32) rounded to TF32 as ``core/tf32.to_tf32`` does, in TensorFlow ops."""
    bits = tf.bitcast(values, tf.int32)
    exponent = tf.constant(tf32.EXPONENT_BITS, tf.int32)
    finite = tf.not_equal(tf.bitwise.bitwise_and(bits, exponent), exponent)
    # The magnitude's bits plus half a TF32 ULP: ties away from zero; finite values never
    # overflow an int32 (the largest, 0x7F7FFFFF, becomes infinity's 0x7F800FFF).
    added = tf.where(finite, bits + tf.constant(tf32.HALF_ULP, tf.int32), bits)
    kept = tf.bitwise.bitwise_and(added, tf.constant(_int32(tf32.KEPT_BITS), tf.int32))
    quiet = tf.bitwise.bitwise_or(kept, tf.constant(tf32.QUIET_NAN_BIT, tf.int32))
    return tf.bitcast(tf.where(tf.math.is_nan(values), quiet, kept), tf.float32)


def _operand(value: Any) -> Any:
    """A float32 operand rounded to TF32; anything else (integers, sparse) as it is."""
    if isinstance(value, tf.SparseTensor | tf.IndexedSlices):
        return value
    tensor = tf.convert_to_tensor(value)
    return tf32_rounded(tensor) if tensor.dtype == tf.float32 else value


def _counting(tally: Counter[str], kind: str) -> None:
    tally[kind] += 1


def _conv(inputs: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
    if (tally := _ACTIVE.get()) is not None:
        _counting(tally, "conv")
        inputs, kernel = _operand(inputs), _operand(kernel)
    return _ORIGINALS["conv"](inputs, kernel, *args, **kwargs)


def _conv_transpose(inputs: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
    if (tally := _ACTIVE.get()) is not None:
        _counting(tally, "conv_transpose")
        inputs, kernel = _operand(inputs), _operand(kernel)
    return _ORIGINALS["conv_transpose"](inputs, kernel, *args, **kwargs)


def _depthwise_conv(*args: Any, **kwargs: Any) -> Any:
    if (tally := _ACTIVE.get()) is not None:
        _counting(tally, _LEFT_ALONE)  # not on tensor cores: left alone, counted
    return _ORIGINALS["depthwise_conv"](*args, **kwargs)


def _separable_conv(
    inputs: Any,
    depthwise_kernel: Any,
    pointwise_kernel: Any,
    strides: Any = 1,
    padding: str = "valid",
    data_format: Any = None,
    dilation_rate: Any = 1,
) -> Any:
    """A separable convolution is a depthwise one (left alone) then a 1×1 convolution
    (rounded), as ``tf.nn.separable_conv2d`` computes it."""
    tally = _ACTIVE.get()
    if tally is None:
        return _ORIGINALS["separable_conv"](
            inputs, depthwise_kernel, pointwise_kernel, strides, padding, data_format, dilation_rate
        )
    _counting(tally, "separable_conv")
    _counting(tally, _LEFT_ALONE)
    depthwise = _ORIGINALS["depthwise_conv"](
        inputs, depthwise_kernel, strides, padding, data_format, dilation_rate
    )
    return _ORIGINALS["conv"](
        _operand(depthwise), _operand(pointwise_kernel), 1, "valid", data_format, 1
    )


def _matmul(x1: Any, x2: Any) -> Any:
    if (tally := _ACTIVE.get()) is not None:
        _counting(tally, "matmul")
        x1, x2 = _operand(x1), _operand(x2)
    return _ORIGINALS["matmul"](x1, x2)


def _einsum(subscripts: str, *operands: Any, **kwargs: Any) -> Any:
    if (tally := _ACTIVE.get()) is not None:
        _counting(tally, "einsum")
        operands = tuple(_operand(operand) for operand in operands)
    return _ORIGINALS["einsum"](subscripts, *operands, **kwargs)


def _tensordot(x1: Any, x2: Any, axes: Any = 2) -> Any:
    if (tally := _ACTIVE.get()) is not None:
        _counting(tally, "tensordot")
        x1, x2 = _operand(x1), _operand(x2)
    return _ORIGINALS["tensordot"](x1, x2, axes=axes)


_WRAPPERS: dict[str, tuple[Any, Callable[..., Any]]] = {
    "conv": (keras_nn, _conv),
    "conv_transpose": (keras_nn, _conv_transpose),
    "depthwise_conv": (keras_nn, _depthwise_conv),
    "separable_conv": (keras_nn, _separable_conv),
    "matmul": (keras_numpy, _matmul),
    "einsum": (keras_numpy, _einsum),
    "tensordot": (keras_numpy, _tensordot),
}


def _install() -> None:
    """Put the wrappers in place of Keras's TensorFlow ops, once per child: Keras's ops look
    ``backend.nn.conv`` and the like up at every call."""
    if _ORIGINALS:
        return
    for name, (module, wrapper) in _WRAPPERS.items():
        _ORIGINALS[name] = getattr(module, name)
        setattr(module, name, wrapper)


@contextlib.contextmanager
def emulating(emulate: str) -> Iterator[Counter[str]]:
    """Run a forward pass (or a layer) under ``emulate`` ("tf32" or "off"); the tally it
    yields counts, kind by kind, the ops rounded while a function traced (none when it
    traced before)."""
    tally: Counter[str] = Counter()
    if emulate == "off":
        yield tally
        return
    _install()
    token = _ACTIVE.set(tally)
    try:
        yield tally
    finally:
        _ACTIVE.reset(token)


def summary(tally: Counter[str]) -> str:
    """What an emulated forward pass rounded, for provenance: ``TF32 emulated on this CPU
    (round to nearest, …): 19 convolutions rounded; 2 depthwise convolutions left alone``."""
    rounded = [f"{tally[kind]} {words}" for kind, words in ROUNDED_KINDS.items() if tally[kind]]
    text = f"TF32 emulated on this CPU ({tf32.ROUNDING}): " + (
        ", ".join(rounded) + " rounded" if rounded else "no convolution or matrix multiply rounded"
    )
    if tally[_LEFT_ALONE]:
        text += f"; {tally[_LEFT_ALONE]} depthwise convolutions left alone"
    return text
