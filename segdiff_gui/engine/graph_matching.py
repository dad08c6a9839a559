"""Matching the user's own artefact's tensors to the Keras layers of its source by the graph,
whatever names the user's converter gave them: a name is never read.

Both graphs are walked from the input. The source's layers come in the order the Keras probe
runs them, each with the layers it reads (``SourceLayer``); the artefact's operators in
execution order, each with the tensors it computes on (``io/artefacts.ArtefactGraph``). A
layer's output is the tensor of the operator that does what the layer does (a convolution, a
pooling, a concatenation …, by the kinds below) on exactly the tensors its input layers were
matched to, seen through the operators that only move or requantize values (a reshape, a
transpose, a quantize: ``_PLUMBING``); then through what the layer does after it (a bias added,
its own activation where the converter did not fuse it), and laid out as the layer's output
(channels-first turned back, the layout as the graph tells it: tensor_layouts.py; a tensor
whose layout the graph does not tell and its shape cannot, H, W and C equal, is unmatched).
A layer that no operator does alone is matched only where the graph says what became of it:

- a layer that changes nothing (a dropout, an identity) is its input's tensor;
- an activation or a batch normalisation the converter fused into the operator before it (a
  ``CONV_2D`` with a fused ``RELU``; a batch normalisation folded into the convolution's
  weights) takes that operator's tensor, and the layer before it, whose own output then exists
  nowhere, is listed as fused;
- an upsampling or a reshape the converter wrote as moves of values (``RESHAPE`` and
  ``TILE``) is the first tensor of that chain of the layer's shape.

Anything else, or an operator two layers could claim, leaves the layer unmatched, listed and
never guessed; a layer whose input is unmatched is unmatched too. Pure Python: no runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from segdiff_gui.engine.tensor_layouts import (
    CHANNELS_FIRST,
    CHANNELS_LAST,
    NOT_DATA,
    Layout,
    tensor_layouts,
)
from segdiff_gui.engine.tensor_matching import NOT_ITS_SHAPE, UNTOLD_LAYOUT, RuntimeTensor, as_layer
from segdiff_gui.io.artefacts import ArtefactGraph, GraphOp

__all__ = ["GraphMatch", "SourceLayer", "keras_kind", "match_by_graph"]

# What a Keras layer computes, by its class (the kind of operator a converter makes of it).
_KERAS_KINDS = {
    **dict.fromkeys(
        (
            "Conv1D",
            "Conv2D",
            "Conv3D",
            "DepthwiseConv1D",
            "DepthwiseConv2D",
            "Conv1DTranspose",
            "Conv2DTranspose",
            "Conv3DTranspose",
            "Dense",
            "EinsumDense",
        ),
        "weighted",
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "MaxPooling1D",
            "MaxPooling2D",
            "MaxPooling3D",
            "AveragePooling1D",
            "AveragePooling2D",
            "AveragePooling3D",
            "GlobalAveragePooling1D",
            "GlobalAveragePooling2D",
            "GlobalAveragePooling3D",
            "GlobalMaxPooling1D",
            "GlobalMaxPooling2D",
            "GlobalMaxPooling3D",
        ),
        "pool",
    ),  # fmt: skip
    "Concatenate": "concat",
    "Add": "add",
    "Subtract": "sub",
    "Multiply": "mul",
    "Maximum": "max",
    "Minimum": "min",
    **dict.fromkeys(("UpSampling1D", "UpSampling2D", "UpSampling3D", "Resizing"), "resize"),
    **dict.fromkeys(("Activation", "ReLU", "Softmax", "LeakyReLU", "ELU", "PReLU"), "act"),
    "BatchNormalization": "norm",
    **dict.fromkeys(
        (
            "Dropout",
            "SpatialDropout1D",
            "SpatialDropout2D",
            "SpatialDropout3D",
            "GaussianNoise",
            "GaussianDropout",
            "AlphaDropout",
            "ActivityRegularization",
            "Identity",
            "InputLayer",
        ),
        "identity",
    ),  # fmt: skip
    **dict.fromkeys(("Reshape", "Flatten", "Permute"), "reshape"),
    **dict.fromkeys(("ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D"), "pad"),
}

# What an artefact's operator computes, by its type (LiteRT's builtin operators, ONNX's).
_OP_KINDS = {
    **dict.fromkeys(
        (
            "CONV_2D",
            "DEPTHWISE_CONV_2D",
            "TRANSPOSE_CONV",
            "FULLY_CONNECTED",
            "BATCH_MATMUL",
            "CONV_3D",
            "Conv",
            "ConvTranspose",
            "MatMul",
            "Gemm",
            "QLinearConv",
            "ConvInteger",
            "MatMulInteger",
            "QLinearMatMul",
        ),
        "weighted",
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "MAX_POOL_2D",
            "AVERAGE_POOL_2D",
            "L2_POOL_2D",
            "MEAN",
            "REDUCE_MAX",
            "MaxPool",
            "AveragePool",
            "GlobalAveragePool",
            "GlobalMaxPool",
            "ReduceMean",
            "ReduceMax",
        ),
        "pool",
    ),  # fmt: skip
    **dict.fromkeys(("CONCATENATION", "Concat"), "concat"),
    **dict.fromkeys(("ADD", "Add", "Sum"), "add"),
    **dict.fromkeys(("SUB", "Sub"), "sub"),
    **dict.fromkeys(("MUL", "Mul"), "mul"),
    **dict.fromkeys(("MAXIMUM", "Max"), "max"),
    **dict.fromkeys(("MINIMUM", "Min"), "min"),
    **dict.fromkeys(
        ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR", "Resize", "Upsample"), "resize"
    ),  # fmt: skip
    **dict.fromkeys(("BatchNormalization",), "norm"),
    **dict.fromkeys(("PAD", "PADV2", "Pad"), "pad"),
}
# An activation operator's function, as a Keras activation's name says it.
_OP_FUNCTIONS = {
    "RELU": "relu", "Relu": "relu", "RELU6": "relu6", "LOGISTIC": "sigmoid",
    "Sigmoid": "sigmoid", "SOFTMAX": "softmax", "Softmax": "softmax", "TANH": "tanh",
    "Tanh": "tanh", "LEAKY_RELU": "leaky_relu", "LeakyRelu": "leaky_relu", "ELU": "elu",
    "Elu": "elu", "HARD_SWISH": "hard_swish", "HardSwish": "hard_swish", "GELU": "gelu",
    "Gelu": "gelu", "PRELU": "prelu", "PRelu": "prelu",
}  # fmt: skip
# The activation LiteRT fuses into an operator's output, as a Keras activation's name.
_FUSED = {"RELU": "relu", "RELU6": "relu6", "TANH": "tanh", "SIGN_BIT": "", "RELU_N1_TO_1": ""}
# Operators that only move, copy or requantize values: seen through, never a layer's own.
_PLUMBING = frozenset(
    ("QUANTIZE", "DEQUANTIZE", "RESHAPE", "TRANSPOSE", "SQUEEZE", "EXPAND_DIMS", "CAST", "TILE",
     "QuantizeLinear", "DequantizeLinear", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
     "Cast", "Identity", "Tile", "Flatten", "Expand")
)  # fmt: skip
# Whose inputs' order does not matter.
_COMMUTATIVE = frozenset(("add", "mul", "max", "min"))
# Layers an operator before them may have absorbed (fused, folded).
_ABSORBABLE = frozenset(("act", "norm"))


@dataclass(frozen=True)
class SourceLayer:
    """A layer output of the source, as the Keras probe names it: its whole batch's shape,
    the outputs it reads ("" for the model's input), and its own activation's name
    (``relu``; "" for none or linear)."""

    name: str
    class_name: str
    shape: tuple[int, ...]
    inputs: tuple[str, ...]
    activation: str = ""


@dataclass(frozen=True)
class GraphMatch:
    """Each matched layer's tensor candidates (the first whose values have the layer's shape
    is its output: a chain of moves may say its shapes only when run), the node that computes
    it (Model Explorer's id), the layers left unmatched, each with why, and each candidate's
    layout as the graph tells it (engine/tensor_layouts.py)."""

    tensors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)
    unmatched: dict[str, str] = field(default_factory=dict)
    layouts: dict[str, Layout] = field(default_factory=dict)  # by tensor key, where told

    def tensor_keys(self) -> set[str]:
        return {key for keys in self.tensors.values() for key in keys}

    def laid_out(
        self, layer: str, shape: tuple[int, ...], tensors: Mapping[str, RuntimeTensor]
    ) -> tuple[RuntimeTensor, tuple[int, ...]] | str:
        """Of ``layer``'s candidate tensors (as run, by key), the first whose values have its
        ``shape`` (or its channels-first turned back, where the graph tells that layout),
        with the permutation that lays it out as the layer's; or why none has."""
        why = NOT_ITS_SHAPE
        for key in self.tensors.get(layer, ()):
            tensor = tensors.get(key)
            if tensor is None:
                continue
            layout = as_layer(tensor.shape, shape, self.layouts.get(key))
            if not isinstance(layout, str):
                return tensor, layout
            why = UNTOLD_LAYOUT if layout == UNTOLD_LAYOUT else why
        return why


def keras_kind(class_name: str) -> str:
    return _KERAS_KINDS.get(class_name, "other")


def _op_kind(op: GraphOp) -> str:
    if op.type in _OP_FUNCTIONS:
        return "act"
    if op.type in _PLUMBING:
        return "plumbing"
    return _OP_KINDS.get(op.type, "other")


def _fits(shape: Sequence[int | None], layer: tuple[int, ...], layout: Layout | None) -> bool:
    """Whether a tensor's declared shape can be the layer's output (its batch aside): as it
    is, or channels-first, as far as its layout (the graph's word, None: untold) allows; a
    dimension it leaves free fits any."""
    if len(shape) != len(layer):
        return False
    wanted = [layer[1:]] if layout != CHANNELS_FIRST or len(layer) != 4 else []
    if len(layer) == 4 and layout != CHANNELS_LAST:
        wanted.append((layer[3], layer[1], layer[2]))
    return any(
        all(d is None or d == w for d, w in zip(shape[1:], want, strict=True)) for want in wanted
    )


class _Graph:
    """The artefact's data flow: who computes each tensor, who reads it."""

    def __init__(self, graph: ArtefactGraph) -> None:
        self.graph = graph
        data = {key for key, tensor in graph.tensors.items() if tensor.dtype not in NOT_DATA}
        data |= {key for op in graph.ops for key in op.outputs if key not in graph.tensors}
        self.ops = [
            GraphOp(
                op.node, op.type, tuple(k for k in op.inputs if k in data), op.outputs, op.fused
            )  # fmt: skip
            for op in graph.ops
            if any(key in data for key in op.outputs)
        ]
        self.producer = {key: op for op in self.ops for key in op.outputs}
        self.layouts = tensor_layouts(graph)
        self.readers: dict[str, list[GraphOp]] = {}
        for op in self.ops:
            for key in op.inputs:
                self.readers.setdefault(key, []).append(op)

    def shape(self, key: str) -> tuple[int | None, ...]:
        tensor = self.graph.tensors.get(key)
        return tuple(tensor.shape) if tensor is not None else ()

    def fits(self, key: str, layer: tuple[int, ...]) -> bool:
        return _fits(self.shape(key), layer, self.layouts.get(key))

    def root(self, key: str) -> str:
        """The tensor ``key`` holds the values of, through moves and requantizations."""
        seen = {key}  # a cycle is refused when the graph is read; never walked round here
        while (op := self.producer.get(key)) is not None and _op_kind(op) == "plumbing":
            if len(op.inputs) != 1 or op.inputs[0] in seen:
                break
            key = op.inputs[0]
            seen.add(key)
        return key

    def only_reader(self, key: str) -> GraphOp | None:
        readers = self.readers.get(key, [])
        return readers[0] if len(readers) == 1 else None

    def moves(self, key: str) -> list[str]:
        """The tensors a chain of moves makes of ``key``, in order (where each reads the one
        before alone)."""
        chain: list[str] = []
        seen = {key}
        while (op := self.only_reader(key)) is not None and _op_kind(op) == "plumbing":
            if len(op.inputs) != 1 or len(op.outputs) != 1 or op.outputs[0] in seen:
                break
            key = op.outputs[0]
            chain.append(key)
            seen.add(key)
        return chain


def _inputs_match(op: GraphOp, roots: list[str], kind: str, graph: _Graph) -> bool:
    ours = [graph.root(key) for key in op.inputs]
    if kind in _COMMUTATIVE:
        return sorted(ours) == sorted(roots)
    return ours == roots


def _after(graph: _Graph, op: GraphOp, layer: SourceLayer) -> tuple[str, ...] | None:
    """The tensors that can be ``layer``'s output once ``op`` computed its core: after a bias
    added and the layer's own activation (fused in ``op``, or its own operator), through
    moves to the layer's layout; None where the layer's activation is nowhere."""
    key = op.outputs[0]
    activated = not layer.activation or _FUSED.get(op.fused) == layer.activation
    if op.fused and layer.activation and _FUSED.get(op.fused) != layer.activation:
        return None  # the operator applies another activation than the layer's
    seen = {key}
    while not activated:
        reader = graph.only_reader(key)
        if reader is None or reader.outputs[0] in seen:
            return None
        kind = _op_kind(reader)
        if kind == "act" and _OP_FUNCTIONS[reader.type] == layer.activation:
            activated = True
        elif not (kind == "plumbing" or (kind == "add" and len(reader.inputs) == 1)):
            return None  # a bias is added to a constant: one data input
        key = reader.outputs[0]
        seen.add(key)
    chain = [key, *graph.moves(key)]
    fitting = tuple(k for k in chain if graph.fits(k, layer.shape))
    return fitting or None


def match_by_graph(layers: Sequence[SourceLayer], artefact: ArtefactGraph) -> GraphMatch:
    """Each of the source's ``layers`` matched to the artefact's tensors by the graph (see
    the module's docstring); the model's input is the artefact's one input."""
    graph = _Graph(artefact)
    found = GraphMatch()
    image: dict[str, str] = {"": artefact.inputs[0]} if len(artefact.inputs) == 1 else {}
    producing: dict[str, GraphOp] = {}  # the operator each matched layer's output came from
    claimed: set[str] = set()
    pending: dict[str, str] = {}  # layers matched to an operator that fuses an activation
    for layer in layers:
        sources = [image.get(name) for name in layer.inputs]
        if not layer.inputs or any(key is None for key in sources):
            found.unmatched[layer.name] = "its input has no tensor of its own in the artefact"
            continue
        inputs = [key for key in sources if key is not None]
        kind = keras_kind(layer.class_name)
        if kind == "identity" and len(inputs) == 1:
            _take(found, image, layer, (inputs[0],), producing, graph)
            continue
        roots = [graph.root(key) for key in inputs]
        wanted = "act" if kind == "act" else kind
        candidates = [
            op
            for op in graph.ops
            if op.node not in claimed
            and wanted != "other"  # what neither side says it does is never paired
            and _op_kind(op) == wanted
            and (wanted != "act" or _OP_FUNCTIONS[op.type] == (layer.activation or ""))
            and _inputs_match(op, roots, kind, graph)
        ]
        shaped = [(op, after) for op in candidates if (after := _after(graph, op, _core(layer)))]
        if len(shaped) == 1:
            op, after = shaped[0]
            claimed.add(op.node)
            producing[layer.name] = op
            found.nodes[layer.name] = op.node
            _take(found, image, layer, after, producing, graph)
            if op.fused and not _core(layer).activation:
                # Its values are after an activation the layer has not: the next layer's,
                # fused into it (which then takes them), or the layer is not matched.
                pending[layer.name] = op.fused
            continue
        if len(shaped) > 1:
            found.unmatched[layer.name] = "more than one operator of the artefact could be it"
            continue
        if kind in _ABSORBABLE and len(inputs) == 1 and _absorbed(graph, layer, layers, producing):
            before = next(other for other in layers if other.name == layer.inputs[0])
            pending.pop(before.name, None)
            found.tensors.pop(before.name, None)
            found.nodes.pop(before.name, None)
            found.unmatched[before.name] = (
                f"its output exists nowhere in the artefact: {layer.name} is fused into it"
            )
            producing[layer.name] = producing[before.name]
            found.nodes[layer.name] = producing[before.name].node
            _take(found, image, layer, (inputs[0],), producing, graph)
            continue
        if kind in ("resize", "reshape", "pad") and len(inputs) == 1:
            chain = tuple(k for k in graph.moves(inputs[0]) if graph.fits(k, layer.shape))
            if chain:
                _take(found, image, layer, chain, producing, graph)
                continue
        found.unmatched[layer.name] = "no operator of the artefact does what it does"
    for name, fused in pending.items():  # fused with an activation no layer after it has
        found.tensors.pop(name, None)
        found.nodes.pop(name, None)
        found.unmatched[name] = f"its operator applies {fused.lower()}, which it does not"
    found.layouts.update(
        {key: graph.layouts[key] for key in found.tensor_keys() if key in graph.layouts}
    )
    return found


def _core(layer: SourceLayer) -> SourceLayer:
    """An activation layer's operator is its own activation: nothing is after it."""
    if keras_kind(layer.class_name) == "act":
        return SourceLayer(layer.name, layer.class_name, layer.shape, layer.inputs, "")
    return layer


def _absorbed(
    graph: _Graph,
    layer: SourceLayer,
    layers: Sequence[SourceLayer],
    producing: dict[str, GraphOp],
) -> bool:
    """Whether ``layer`` (an activation or a batch normalisation) was fused into the
    operator of the layer before it: that operator's tensor is the only reader-free way on,
    the layer before it has no activation of its own, and (an activation) the operator fuses
    exactly this one."""
    before = next((other for other in layers if other.name == layer.inputs[0]), None)
    if before is None or before.name not in producing or before.activation:
        return False
    op = producing[before.name]
    if keras_kind(layer.class_name) == "act":
        return bool(layer.activation) and _FUSED.get(op.fused) == layer.activation
    # A normalisation folded into the weights: no scale and shift of its own after them.
    affine = any(
        _op_kind(reader) in ("mul", "add", "sub") and len(reader.inputs) == 1
        for key in op.outputs
        for reader in graph.readers.get(key, [])
    )
    return _op_kind(op) == "weighted" and not op.fused and not affine


def _take(
    found: GraphMatch,
    image: dict[str, str],
    layer: SourceLayer,
    keys: tuple[str, ...],
    producing: dict[str, GraphOp],
    graph: _Graph,
) -> None:
    """``layer`` is the first of ``keys`` whose values have its shape; later layers read the
    values all of them hold (they differ in layout only)."""
    found.tensors[layer.name] = keys
    image[layer.name] = keys[0]
    if layer.name not in found.nodes and (op := graph.producer.get(keys[0])) is not None:
        found.nodes[layer.name] = op.node
        producing.setdefault(layer.name, op)
