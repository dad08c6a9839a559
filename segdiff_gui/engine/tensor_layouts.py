"""Which layout each four-dimensional tensor of an artefact's graph holds its values in, as
the graph says it (never guessed from a shape: a 16×16×16 tensor is the same shape either way).

segdiff feeds images N×H×W×C, so the graph's input is channels-last. An operator whose format
fixes its layout says it: LiteRT's convolutions, poolings and resizes are channels-last, ONNX's
``Conv``, pools and normalisations channels-first. An operator that works value by value or
axis by axis (an activation, an addition, a (de)quantize, a concatenation, a padding …) keeps
the layout its data inputs agree on; an ONNX ``Transpose`` moves the channels first or last by
its permutation. Anything else (a reshape, a transpose whose permutation is not read) leaves its
output's layout untold. Pure Python: no runtime.
"""

from __future__ import annotations

from typing import Literal

from segdiff_gui.io.artefacts import ArtefactGraph, GraphOp

__all__ = ["CHANNELS_FIRST", "CHANNELS_LAST", "NOT_DATA", "Layout", "tensor_layouts"]

Layout = Literal["first", "last"]
CHANNELS_FIRST: Layout = "first"
CHANNELS_LAST: Layout = "last"

# Operators whose format fixes their output's layout.
_FIXED: dict[str, dict[str, Layout]] = {
    "tflite": dict.fromkeys(
        (
            "CONV_2D",
            "DEPTHWISE_CONV_2D",
            "TRANSPOSE_CONV",
            "MAX_POOL_2D",
            "AVERAGE_POOL_2D",
            "L2_POOL_2D",
            "RESIZE_NEAREST_NEIGHBOR",
            "RESIZE_BILINEAR",
        ),
        CHANNELS_LAST,
    ),  # fmt: skip
    "onnx": dict.fromkeys(
        (
            "Conv",
            "ConvTranspose",
            "QLinearConv",
            "ConvInteger",
            "MaxPool",
            "AveragePool",
            "LpPool",
            "GlobalAveragePool",
            "GlobalMaxPool",
            "GlobalLpPool",
            "BatchNormalization",
            "InstanceNormalization",
            "LRN",
            "QLinearAveragePool",
            "QLinearGlobalAveragePool",
        ),
        CHANNELS_FIRST,
    ),  # fmt: skip
}
# Operators that keep the layout of their data inputs (value by value, or axis by axis).
_KEEPING = frozenset(
    (
        # LiteRT
        "RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "LEAKY_RELU", "ELU", "HARD_SWISH",
        "GELU", "PRELU", "SOFTMAX", "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM",
        "QUANTIZE", "DEQUANTIZE", "CAST", "CONCATENATION", "PAD", "PADV2", "TILE", "ADD_N",
        # ONNX
        "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "HardSwish", "HardSigmoid", "Gelu",
        "PRelu", "Clip", "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "QuantizeLinear",
        "DequantizeLinear", "Cast", "Identity", "Dropout", "Concat", "Pad", "Resize",
        "Upsample", "Tile", "QLinearAdd", "QLinearMul", "QLinearLeakyRelu", "QLinearSigmoid",
        "QLinearConcat",
    )
)  # fmt: skip
# Shape arithmetic (an ONNX graph computes a reshape's shape from the data's): not data.
NOT_DATA = frozenset(("int32", "int64", "bool", "uint64"))
_TO_FIRST = (0, 3, 1, 2)  # an ONNX Transpose from channels-last to channels-first
_TO_LAST = (0, 2, 3, 1)


def _transposed(op: GraphOp, layout: Layout | None) -> Layout | None:
    if op.perm == (0, 1, 2, 3):
        return layout
    if op.perm == _TO_FIRST and layout == CHANNELS_LAST:
        return CHANNELS_FIRST
    if op.perm == _TO_LAST and layout == CHANNELS_FIRST:
        return CHANNELS_LAST
    return None


def _is_data(graph: ArtefactGraph, key: str) -> bool:
    tensor = graph.tensors.get(key)
    return tensor is None or tensor.dtype not in NOT_DATA


def tensor_layouts(graph: ArtefactGraph) -> dict[str, Layout]:
    """The layout of each tensor the graph tells it of (by key); a tensor absent is untold."""
    layouts: dict[str, Layout] = dict.fromkeys(graph.inputs, CHANNELS_LAST)
    fixed = _FIXED.get(graph.format, {})
    for op in graph.ops:  # in execution order: each reads what the ones before it gave
        told: Layout | None = fixed.get(op.type)
        if told is None and op.type in _KEEPING and op.inputs:
            data = [key for key in op.inputs if _is_data(graph, key)]
            agreed = {layouts.get(key) for key in data}
            told = agreed.pop() if len(agreed) == 1 else None
        elif told is None and op.type == "Transpose" and len(op.inputs) == 1:
            told = _transposed(op, layouts.get(op.inputs[0]))
        if told is not None:
            layouts.update(dict.fromkeys(op.outputs, told))
    return layouts
