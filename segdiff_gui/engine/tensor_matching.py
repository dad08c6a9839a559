"""Matching a converted model's tensors to the Keras layers they came from, by the names the
converters give them (for the layer probe of converted runtimes: converted_probe.py).

A converter names each tensor after the TensorFlow op it came from
(``unet_1/enc1_1_1/Relu;unet_1/enc1_1_1/BiasAdd…``), whose name scope is the Keras layer's
(with a ``_1`` the tracing adds): a layer's output is the last tensor in execution order its
scope produced, if its shape is the layer's (ONNX's channels-first tensors are turned back).
Pure Python and numpy: no runtime is imported here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ExpectedLayer", "RuntimeTensor", "last_of_each_layer", "layer_of", "match_layers"]

_TRACE_SUFFIX = re.compile(r"_\d+$")
_DECORATION = re.compile(r"(#\d+|:\d+)$")  # a shared layer's second call, a multi-output's


@dataclass(frozen=True)
class ExpectedLayer:
    """A Keras layer output as the Keras probe names it, with its whole batch's shape."""

    name: str
    class_name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class RuntimeTensor:
    """An intermediate tensor of the converted model: its name, shape, and how to read it
    (as float32, dequantized where the runtime quantized it)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # as the runtime holds it: "int8" where quantized
    read: Callable[[], np.ndarray]


def layer_of(tensor_name: str, paths: set[str], prefixes: set[str]) -> str | None:
    """The Keras layer (hierarchical path) whose name scope made ``tensor_name``; None for a
    tensor of no layer (a converter's own transposes and shapes)."""
    segments = tensor_name.split(";", 1)[0].split(":", 1)[0].split("/")[1:-1]
    found, candidates = None, [""]
    for segment in segments:
        options = dict.fromkeys((segment, _TRACE_SUFFIX.sub("", segment)))
        candidates = [
            path
            for path in (f"{c}/{o}" if c else o for c in candidates for o in options)
            if path in prefixes
        ]
        if not candidates:
            break
        exact = [path for path in candidates if path in paths]
        if exact:
            found = max(exact, key=len)
    return found


def _layer_paths(expected: Sequence[ExpectedLayer]) -> tuple[list[str], set[str], set[str]]:
    """Each expected layer's path (its name without a call's or an output's decoration), the
    paths that name one layer output only (a shared layer's calls are ambiguous), and every
    prefix of those."""
    bases = [_DECORATION.sub("", layer.name) for layer in expected]
    paths = {base for base in bases if bases.count(base) == 1}
    prefixes = {"/".join(p.split("/")[: i + 1]) for p in paths for i in range(p.count("/") + 1)}
    return bases, paths, prefixes


def last_of_each_layer(expected: Sequence[ExpectedLayer], names: Sequence[str]) -> set[str]:
    """Among tensor names in execution order, the last each layer's scope made."""
    _, paths, prefixes = _layer_paths(expected)
    last = {layer_of(name, paths, prefixes): name for name in names}
    return {name for path, name in last.items() if path is not None}


def _as_layer(array_shape: tuple[int, ...], wanted: tuple[int, ...]) -> tuple[int, ...] | None:
    """How to lay a tensor out as the layer's: as it is, channels-first turned back (ONNX), or
    None when it is not the layer's output."""
    if array_shape == wanted:
        return tuple(range(len(wanted)))
    if len(wanted) == 4 and array_shape == (wanted[0], wanted[3], wanted[1], wanted[2]):
        return (0, 2, 3, 1)
    return None


def match_layers(
    expected: Sequence[ExpectedLayer],
    tensors: Sequence[RuntimeTensor],
    finals: Sequence[RuntimeTensor] = (),
) -> tuple[dict[str, tuple[RuntimeTensor, tuple[int, ...]]], list[str]]:
    """Each expected layer's tensor (the last its scope made, of its shape) and layout; and
    the layers that have none (fused away, or ambiguous: a shared layer's calls). ``finals``
    are the model's outputs, each named by the layer that gives it: the converter names them
    after the signature, and a layer's last op (a sigmoid) may be the output's alone."""
    bases, paths, prefixes = _layer_paths(expected)
    last: dict[str, RuntimeTensor] = {}
    for tensor in tensors:
        if (path := layer_of(tensor.name, paths, prefixes)) is not None:
            last[path] = tensor
    last.update({tensor.name: tensor for tensor in finals if tensor.name in paths})
    matched: dict[str, tuple[RuntimeTensor, tuple[int, ...]]] = {}
    unmatched = []
    for layer, base in zip(expected, bases, strict=True):
        tensor = last.get(base) if base in paths else None
        layout = _as_layer(tensor.shape, layer.shape) if tensor is not None else None
        if tensor is None or layout is None:
            unmatched.append(layer.name)
        else:
            matched[layer.name] = (tensor, layout)
    return matched, unmatched
