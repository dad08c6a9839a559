"""Every layer's output of a Keras model, in execution order, one layer at a time (for the
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

__all__ = ["LayerCall", "LayerOutput", "activation_of", "run_layer_by_layer", "tappable_graph"]

# A layer's call under the probe's configuration: (layer, args, kwargs) → its outputs.
LayerCall = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass(frozen=True)
class LayerOutput:
    name: str  # hierarchical, unique in the model
    class_name: str
    value: Any  # the runtime's tensor, the whole batch
    # The layer outputs it read, by name ("" the model's input): the source's graph, which
    # an artefact's tensors are matched to (engine/graph_matching.py).
    inputs: tuple[str, ...] = ()
    activation: str = ""  # its own activation's name ("relu"; "" for none or linear)


def activation_of(operation: Any) -> str:
    """The activation a layer applies to its output, as its name (``relu``, ``sigmoid``);
    "" where none (``linear``) or not one a converter names."""
    kind = type(operation).__name__
    if kind == "ReLU":
        plain = not getattr(operation, "negative_slope", 0) and not getattr(
            operation, "threshold", 0
        )
        cap = getattr(operation, "max_value", None)
        return ("relu" if cap is None else "relu6" if cap == 6 else "") if plain else ""
    fixed = {"Softmax": "softmax", "LeakyReLU": "leaky_relu", "ELU": "elu", "PReLU": "prelu"}
    if kind in fixed:
        return fixed[kind]
    function = getattr(operation, "activation", None)
    name = getattr(function, "__name__", "") if callable(function) else ""
    return "" if name == "linear" else name


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
    graph = _graph(model)
    assert graph is not None, "tappable_graph says why a model has none"
    sources = [""] * len(graph.inputs)
    return _walk(graph, list(inputs), sources, call, emit, "", _Names())[0]


def _walk(
    graph: Any,
    inputs: list[Any],
    sources: list[str],
    call: LayerCall,
    emit: Callable[[LayerOutput], None],
    prefix: str,
    names: _Names,
) -> tuple[list[Any], list[str]]:
    """The graph's outputs, and the names of the layer outputs they are (``sources``: those
    of its inputs)."""
    nodes = _nodes(graph)
    # How many readers each tensor still has: it is dropped after its last one.
    readers = Counter(id(t) for node in nodes for t in node.input_tensors)
    readers.update(id(t) for t in graph.outputs)
    values = {id(ref): value for ref, value in zip(graph.inputs, inputs, strict=True)}
    made_by = {id(ref): name for ref, name in zip(graph.inputs, sources, strict=True)}
    for node in nodes:
        args, kwargs = node.arguments.fill_in(values)
        operation = node.operation
        name = names(prefix + operation.name)
        read = [made_by.get(id(tensor), "") for tensor in node.input_tensors]
        inner = _graph(operation)
        if inner is not None and len(tree.flatten(args)) == len(inner.inputs):
            flat = tree.flatten(args)
            outputs, shown = _walk(inner, flat, read[: len(flat)], call, emit, name + "/", names)
        else:
            if "training" in getattr(operation, "_call_context_args", ()):
                kwargs = {
                    **kwargs,
                    "training": False,
                }  # as the plain run's model(…, training=False)
            outputs = tree.flatten(call(operation, args, kwargs))
            shown = [name if len(outputs) == 1 else f"{name}:{i}" for i in range(len(outputs))]
            function = activation_of(operation)
            for value, output in zip(outputs, shown, strict=True):
                emit(LayerOutput(output, type(operation).__name__, value, tuple(read), function))
        for ref, value, output in zip(node.outputs, outputs, shown, strict=True):
            values[id(ref)] = value
            made_by[id(ref)] = output
        for tensor in node.input_tensors:
            readers[id(tensor)] -= 1
            if readers[id(tensor)] <= 0:
                values.pop(id(tensor), None)
    return [values[id(ref)] for ref in graph.outputs], [
        made_by.get(id(ref), "") for ref in graph.outputs
    ]
