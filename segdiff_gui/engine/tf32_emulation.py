"""TF32 emulated on a CPU (``emulate=tf32``), under any Keras backend that can round.

An Ampere or later GPU with TF32 on computes a float32 convolution or matrix multiply on its
tensor cores: each input and weight rounded to TF32 (10 mantissa bits), the products summed in
float32. Here the same ops of Keras's backend are wrapped, inside the child only: while a
forward pass (or a probed layer) runs under :func:`emulating`, their float32 operands are
rounded to TF32 by the runtime's own integer ops on the bits (the backend's ``tf32_operand``:
``tf.bitcast`` under TensorFlow, ``lax.bitcast_convert_type`` under JAX, ``Tensor.view`` under
PyTorch), as ``core/tf32.py`` rounds them in numpy, bit for bit; the op itself then computes in
float32 as before. The wrappers look the switch up when the op is called: a ``tf.function`` or
``jax.jit`` traces under it (every call of an emulated forward pass runs under it, so a new
batch size traces emulated too), so it composes with XLA and every batch size; a forward pass
without it calls the original op unchanged, and has its own compiled function (the knob is in
the forward key).

Rounded: ``conv`` (Conv1D/2D/3D, grouped ones too), ``conv_transpose`` (Conv*DTranspose), the
pointwise half of ``separable_conv`` (its 1×1 convolution; the depthwise half is left alone),
``matmul`` (Dense, attention's products), ``einsum`` (EinsumDense, MultiHeadAttention) and
``tensordot``. Left alone: ``depthwise_conv`` (DepthwiseConv*D) and separable convolutions'
depthwise half, which cuDNN computes without tensor cores, and everything that is not a
matrix product (batch normalisation, activations, pooling, resizing). A model that calls the
runtime's ops itself (a Lambda layer, a custom layer calling ``tf.matmul``) is not rounded
there: the run's provenance says how many ops of each kind were rounded.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from segdiff_gui.core import tf32

__all__ = ["ROUNDED_KINDS", "Operand", "emulating", "summary"]

# A float32 operand rounded to TF32 in the runtime's ops; anything else (integers, sparse
# tensors) as it is.
Operand = Callable[[Any], Any]

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

# The tally of the op calls under emulation, and how operands are rounded; None: no emulation.
_ACTIVE: contextvars.ContextVar[tuple[Counter[str], Operand] | None] = contextvars.ContextVar(
    "segdiff_tf32_emulation", default=None
)
_ORIGINALS: dict[str, Callable[..., Any]] = {}


def _two_operands(kind: str) -> Callable[..., Any]:
    """The wrapper of an op of two operands (``conv``, ``conv_transpose``, ``matmul``,
    ``tensordot``): both rounded under emulation, its other arguments as they are."""

    def wrapper(first: Any, second: Any, *args: Any, **kwargs: Any) -> Any:
        if (active := _ACTIVE.get()) is not None:
            tally, rounded = active
            tally[kind] += 1
            first, second = rounded(first), rounded(second)
        return _ORIGINALS[kind](first, second, *args, **kwargs)

    return wrapper


def _left_alone(*args: Any, **kwargs: Any) -> Any:
    """A depthwise convolution as the backend computes it, unrounded: emulation is suspended
    while it runs (PyTorch's Keras backend computes one with its own, wrapped, ``conv``)."""
    token = _ACTIVE.set(None)
    try:
        return _ORIGINALS["depthwise_conv"](*args, **kwargs)
    finally:
        _ACTIVE.reset(token)


def _depthwise_conv(*args: Any, **kwargs: Any) -> Any:
    if (active := _ACTIVE.get()) is None:
        return _ORIGINALS["depthwise_conv"](*args, **kwargs)
    active[0][_LEFT_ALONE] += 1  # not on tensor cores: left alone, counted
    return _left_alone(*args, **kwargs)


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
    if (active := _ACTIVE.get()) is None:
        return _ORIGINALS["separable_conv"](
            inputs, depthwise_kernel, pointwise_kernel, strides, padding, data_format, dilation_rate
        )
    tally, rounded = active
    tally["separable_conv"] += 1
    tally[_LEFT_ALONE] += 1
    depthwise = _left_alone(inputs, depthwise_kernel, strides, padding, data_format, dilation_rate)
    return _ORIGINALS["conv"](
        rounded(depthwise), rounded(pointwise_kernel), 1, "valid", data_format
    )


def _einsum(subscripts: str, *operands: Any, **kwargs: Any) -> Any:
    if (active := _ACTIVE.get()) is not None:
        tally, rounded = active
        tally["einsum"] += 1
        operands = tuple(rounded(operand) for operand in operands)
    return _ORIGINALS["einsum"](subscripts, *operands, **kwargs)


_WRAPPERS: dict[str, tuple[str, Callable[..., Any]]] = {
    "conv": ("nn", _two_operands("conv")),
    "conv_transpose": ("nn", _two_operands("conv_transpose")),
    "depthwise_conv": ("nn", _depthwise_conv),
    "separable_conv": ("nn", _separable_conv),
    "matmul": ("numpy", _two_operands("matmul")),
    "einsum": ("numpy", _einsum),
    "tensordot": ("numpy", _two_operands("tensordot")),
}


def _install() -> None:
    """Put the wrappers in place of the ops of the Keras backend this child runs, once: Keras's
    ops look ``backend.nn.conv`` and the like up at every call."""
    if _ORIGINALS:
        return
    from keras.src import backend as keras_backend  # the child's runtime, set before import

    for name, (module_name, wrapper) in _WRAPPERS.items():
        module = getattr(keras_backend, module_name)
        _ORIGINALS[name] = getattr(module, name)
        setattr(module, name, wrapper)


@contextlib.contextmanager
def emulating(emulate: str, rounded: Operand) -> Iterator[Counter[str]]:
    """Run a forward pass (or a layer) under ``emulate`` ("tf32" or "off"), operands rounded
    by ``rounded`` (the backend's). The tally it yields counts, kind by kind, the ops rounded
    while it ran Python: a traced function counts when it traces, an eager one every call."""
    tally: Counter[str] = Counter()
    if emulate == "off":
        yield tally
        return
    _install()
    token = _ACTIVE.set((tally, rounded))
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
