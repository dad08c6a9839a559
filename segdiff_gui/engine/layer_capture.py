"""Every layer's output of a Keras model, in execution order, one layer at a time (issue 15's
layer probe).

The model's own graph is walked node by node, as Keras's functional call does it, and each
layer is called through the runtime's ``layer_call`` (a ``tf.function`` per layer under
TensorFlow, with XLA as the configuration says; a ``jax.jit`` per layer under JAX with XLA):
each layer computes exactly as it does inside the whole model, as long as the runtime fuses
nothing across layers. Whether it did is checked afterwards, bit for bit, against the plain
run (see the worker), never assumed.

Memory: a tensor is dropped as soon as the last layer that reads it has run, so at any moment
only the tensors still to be read are held (as in the plain forward pass), and each layer's
output is handed to ``emit`` before the next layer runs.

Nested models (a MobileNetV2 encoder inside a U-Net; a Sequential block) are walked into, and
their layers named hierarchically: ``encoder/block_1_expand``. A layer called twice (a shared
layer) is named ``name#2`` the second time; a layer with several outputs gives ``name:1`` …
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
from keras import tree

from segdiff_gui.core.errors import InputError

__all__ = ["LayerCall", "LayerOutput", "run_layer_by_layer", "tappable_graph"]

# A layer's call under the probe's configuration: (layer, args, kwargs) → its outputs.
LayerCall = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass(frozen=True)
class LayerOutput:
    name: str  # hierarchical, unique in the model
    class_name: str
    value: Any  # the runtime's tensor, the whole batch


def _graph(model: Any) -> Any | None:
    """The functional graph behind ``model``: itself, a Sequential's, or None (subclassed)."""
    if isinstance(model, keras.Sequential):
        if getattr(model, "_functional", None) is None and model.inputs:
            model.build(model.inputs[0].shape)
        return getattr(model, "_functional", None)
    if hasattr(model, "_nodes_by_depth") and hasattr(model, "_outputs_struct"):
        return model
    return None


def tappable_graph(model: Any, path: str | Path) -> Any:
    """The graph of ``model`` to walk, or one line saying why its layers cannot be tapped."""
    graph = _graph(model)
    if graph is None:
        raise InputError(
            path,
            f"is a subclassed Keras model ({type(model).__name__}): its layers run inside its "
            "own call(), where segdiff cannot tap them; a functional or Sequential model "
            "(the same layers built with keras.Input) can be probed layer by layer",
        )
    return graph


def _nodes(graph: Any) -> list[Any]:
    """The graph's computing nodes in the order Keras's functional call runs them."""
    by_depth = graph._nodes_by_depth
    return [
        node
        for depth in sorted(by_depth, reverse=True)
        for node in by_depth[depth]
        if node.operation is not None and not node.is_input
    ]


class _Names:
    """Unique hierarchical names: a shared layer's second call is ``name#2``."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def __call__(self, name: str) -> str:
        self._seen[name] += 1
        count = self._seen[name]
        return name if count == 1 else f"{name}#{count}"


def run_layer_by_layer(
    model: Any,
    inputs: Sequence[Any],
    call: LayerCall,
    emit: Callable[[LayerOutput], None],
) -> list[Any]:
    """Run ``model`` on ``inputs`` layer by layer, handing every layer's output to ``emit``
    in execution order; returns the model's outputs (a list)."""
    return _walk(_graph(model), list(inputs), call, emit, "", _Names())


def _walk(
    graph: Any,
    inputs: list[Any],
    call: LayerCall,
    emit: Callable[[LayerOutput], None],
    prefix: str,
    names: _Names,
) -> list[Any]:
    nodes = _nodes(graph)
    # How many readers each tensor still has: it is dropped after its last one.
    readers = Counter(id(t) for node in nodes for t in node.input_tensors)
    readers.update(id(t) for t in graph.outputs)
    values = {id(ref): value for ref, value in zip(graph.inputs, inputs, strict=True)}
    for node in nodes:
        args, kwargs = node.arguments.fill_in(values)
        operation = node.operation
        name = names(prefix + operation.name)
        inner = _graph(operation)
        if inner is not None and len(tree.flatten(args)) == len(inner.inputs):
            outputs = _walk(inner, tree.flatten(args), call, emit, name + "/", names)
        else:
            if "training" in getattr(operation, "_call_context_args", ()):
                kwargs = {
                    **kwargs,
                    "training": False,
                }  # as the plain run's model(…, training=False)
            outputs = tree.flatten(call(operation, args, kwargs))
            for index, value in enumerate(outputs):
                shown = name if len(outputs) == 1 else f"{name}:{index}"
                emit(LayerOutput(shown, type(operation).__name__, value))
        for ref, value in zip(node.outputs, outputs, strict=True):
            values[id(ref)] = value
        for tensor in node.input_tensors:
            readers[id(tensor)] -= 1
            if readers[id(tensor)] <= 0:
                values.pop(id(tensor), None)
    return [values[id(ref)] for ref in graph.outputs]
