"""Which layer TensorFlow cannot compute in float64, and for want of which op's kernel: the
exact reference's refusal in one line.

TensorFlow registers most kernels for float64 on the CPU, but not all (``MaxPool3D``,
``AvgPool3D``, ``LRN``, ``FusedBatchNormV3`` …). A float64 model using one fails either while
its graph is traced (the op's definition leaves float64 out: a ``TypeError`` that names the
layer's class only) or when it runs (no kernel: an error naming a graph node). Neither names
the layer as the user knows it. So when an exact run fails, its model is walked layer by layer
(``layer_capture``, as the layer probe walks it) on the same batch until a layer fails; that
layer's float32 twin is traced, and the ops of its graph that compute in float32 and have no
float64 kernel on the device are the ones named, from TensorFlow's own kernel registry.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from keras import tree
from tensorflow.python.framework import kernels

from segdiff_gui.engine.layer_capture import run_layer_by_layer

__all__ = ["float64_refusal"]

_NO_KERNEL = re.compile(r"No registered '([^']+)' OpKernel")
_TRACE_ERRORS = (TypeError, tf.errors.NotFoundError, tf.errors.InvalidArgumentError)


class _Failed(Exception):
    def __init__(self, layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__(layer.name)
        self.layer, self.args, self.kwargs = layer, args, kwargs


@functools.cache
def _float_types(device_type: str) -> dict[str, frozenset[int]]:
    """Each op's registered value types (its ``T``) on ``device_type``, from the registry; an
    op registered without a constraint on ``T`` is left out (it takes any)."""
    found: dict[str, set[int]] = {}
    unconstrained: set[str] = set()
    for kernel in kernels.get_all_registered_kernels().kernel:
        if kernel.device_type != device_type:
            continue
        allowed = [c.allowed_values.list.type for c in kernel.constraint if c.name == "T"]
        if not allowed:
            unconstrained.add(kernel.op)
            continue
        found.setdefault(kernel.op, set()).update(allowed[0])
    return {op: frozenset(types) for op, types in found.items() if op not in unconstrained}


def _without_float64(layer: Any, args: tuple[Any, ...], device_type: str) -> list[str]:
    """The ops of ``layer``'s float32 twin that compute in float32 and have no float64 kernel
    on ``device_type``, as TensorFlow names them."""
    twin = layer.__class__.from_config({**layer.get_config(), "dtype": "float32"})
    specs = tree.map_structure(
        lambda value: (
            tf.TensorSpec(value.shape, tf.float32)
            if getattr(value, "dtype", None) == tf.float64
            else value
        ),
        args,
    )
    graph = tf.function(lambda *inputs: twin(*inputs)).get_concrete_function(*specs).graph
    registered = _float_types(device_type)
    double, single = tf.float64.as_datatype_enum, tf.float32.as_datatype_enum
    missing = []
    for operation in graph.get_operations():
        types = registered.get(operation.type)
        try:
            computes_in_float32 = operation.get_attr("T") == tf.float32
        except ValueError:  # no T: not a computation on the values' type
            continue
        if (
            types is not None
            and computes_in_float32
            and single in types
            and double not in types
            and operation.type not in missing
        ):
            missing.append(operation.type)
    return missing


def float64_refusal(
    model: keras.Model,
    batch: Any,
    device: str,
    device_type: str,
    names: Callable[[Any], str],
    error: BaseException,
) -> str:
    """Why ``model`` (rebuilt in float64) cannot compute ``batch`` on ``device`` (its
    ``device_type``, "CPU" or "GPU"), in one line naming the layer and the op, or "" when no
    layer fails alone (``error`` is then not a float64 kernel's absence). ``names`` gives a
    layer's hierarchical name."""

    def call(layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return layer(*args, **kwargs)
        except _TRACE_ERRORS:
            raise _Failed(layer, args, kwargs) from None

    try:
        run_layer_by_layer(model, [batch], call, lambda _output: None)
    except _Failed as failed:
        layer = failed.layer
        try:
            ops = _without_float64(layer, failed.args, device_type)
        except Exception:  # noqa: BLE001 - the twin is only asked which ops it has
            ops = []
        if not ops and (match := _NO_KERNEL.search(str(error))):
            ops = [match.group(1)]
        said = f"op {', '.join(ops)}" if ops else "an op of it"
        where = f"the {device_type}" if device_type == "CPU" else f"{device_type} {device}"
        return (
            f"layer {names(layer)!r} ({type(layer).__name__}): TensorFlow has no float64 "
            f"kernel for {said} on {where}; the exact reference of this model needs another "
            "runtime (runtime=jax or runtime=torch)"
        )
    except Exception:  # noqa: BLE001 - another failure: the run's own error is said
        return ""
    return ""
