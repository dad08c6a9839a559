"""Matching a converted model's tensors to the Keras layers they came from, by the names the
converters give them (for the layer probe of converted runtimes: converted_probe.py).

A converter names each tensor after the TensorFlow ops it came from
(``unet_1/enc1_1_1/Relu;unet_1/enc1_1_1/BiasAdd…``: the first is the op whose output it is),
each under the name scope of the Keras layer that made it, inside the model's own scope. The
scope is the layer's name made unique by TensorFlow when the layer is traced: the name with
a ``_N`` added (``enc1_1`` → ``enc1_1_1``), and where that is taken, another N. So with
Keras's default names a scope can also be another layer's name: the first convolution
``conv2d`` runs in scope ``conv2d_1``, and the layer ``conv2d_1`` in ``conv2d_1_2``; a layer
called after ``conv2d_1`` … ``conv2d_5`` have run can get ``conv2d_6``, the name of one that
runs later.

So each scope is matched whole, level by level from the model's own inward (a nested model's
layers within the scope matched to it), to one layer of that level: a scope is its layer's
name, or that name and one ``_N``. Each layer call takes one scope, so a scope with one such
layer left takes it, and that settles the others (``conv2d_1_2`` can only be ``conv2d_1``, so
``conv2d_1`` is ``conv2d``). A scope still open between two layers is settled by the way this
trace names scopes (with the ``_N`` or without), as the settled ones show; where they show
neither, or both, it stays unmatched rather than credit a layer that did not make it. A shared
layer's scopes are its own, matched to none of its calls.

A layer's output is then the last tensor in execution order its scope produced, if its shape
is the layer's (ONNX's channels-first tensors are turned back, where the graph tells the
layout: engine/tensor_layouts.py). Pure Python and numpy: no
runtime is imported here.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from segdiff_gui.engine.tensor_layouts import CHANNELS_FIRST, CHANNELS_LAST, Layout

__all__ = [
    "NOT_ITS_SHAPE",
    "UNTOLD_LAYOUT",
    "ExpectedLayer",
    "LayerScopes",
    "RuntimeTensor",
    "as_layer",
    "last_of_each_layer",
    "match_layers",
]

_UNIQUE_SUFFIX = re.compile(r"_\d+$")  # what TensorFlow adds to make a scope unique
_OUTPUT = re.compile(r":\d+$")  # a multi-output layer's output: name:1
_CALL = re.compile(r"#\d+$")  # a shared layer's second call: name#2
_DECORATION = re.compile(r"(#\d+|:\d+)$")  # either

Scope = tuple[str, ...]  # name scope components below the model's own


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
    key: str = ""  # the tensor in its graph (io/artefacts.ArtefactGraph): an index, a name
    scale: float = 0.0  # a quantized tensor's scale and zero point (one per tensor)
    zero_point: int = 0


def _layer_paths(expected: Sequence[ExpectedLayer]) -> tuple[list[str], set[str]]:
    """Each expected layer's path (its name without a call's or an output's decoration), and
    the paths that name one layer output only (a shared layer's calls and a multi-output
    layer's outputs are ambiguous: left unmatched)."""
    bases = [_DECORATION.sub("", layer.name) for layer in expected]
    return bases, {base for base in bases if bases.count(base) == 1}


def _scopes(tensor_name: str) -> list[Scope]:
    """The scopes of the ops a tensor is named after (the first: the op whose output it is),
    each without the model's own scope and the op's name."""
    parts = tensor_name.split(";")
    return [tuple(part.split(":", 1)[0].split("/")[1:-1]) for part in parts]


class LayerScopes:
    """Which Keras layer each name scope of a converted model is, from the expected layers
    and every tensor name the converted model has, in execution order."""

    def __init__(self, expected: Sequence[ExpectedLayer], names: Sequence[str]) -> None:
        _, self.paths = _layer_paths(expected)
        calls = [_OUTPUT.sub("", layer.name) for layer in expected]  # a layer call's path
        # Below each call path, each layer name and its calls: {"conv": {"conv", "conv#2"}}.
        self._children: dict[Scope, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for call in dict.fromkeys(calls):
            components = call.split("/")
            for depth, component in enumerate(components):
                below = self._children[tuple(components[:depth])]
                below[_CALL.sub("", component)].add(component)
        self._layer: dict[Scope, Scope | None] = {(): ()}  # a scope's layer call, or None
        self._suffixed = 0  # scopes settled as their layer's name and an _N …
        self._verbatim = 0  # … and as the name alone
        seen = dict.fromkeys(
            scope[: depth + 1]
            for name in names
            for scope in _scopes(name)
            for depth in range(len(scope))
        )
        for depth in range(1, max((len(scope) for scope in seen), default=0) + 1):
            groups: dict[Scope, list[str]] = defaultdict(list)
            for scope in seen:
                if len(scope) == depth and self._layer.get(scope[:-1]) is not None:
                    groups[scope[:-1]].append(scope[-1])
            for parent, parts in groups.items():
                caller = self._layer[parent]
                assert caller is not None
                below = self._children.get(caller, {})
                for part, name in self._settle(parts, below).items():
                    forms = below.get(name, set()) if name is not None else set()
                    only = (*caller, next(iter(forms))) if len(forms) == 1 else None
                    self._layer[(*parent, part)] = only

    def _settle(self, scopes: list[str], below: dict[str, set[str]]) -> dict[str, str | None]:
        """Each of the scopes of one level (in order of appearance) as a layer name of that
        level, or None: every layer call takes one scope."""
        left = {name: len(forms) for name, forms in below.items()}
        # A scope is its layer's name, or that name and one _N: never a prefix of a name.
        named = {scope: dict.fromkeys((scope, _UNIQUE_SUFFIX.sub("", scope))) for scope in scopes}
        options = {scope: [name for name in named[scope] if name in left] for scope in scopes}
        settled: dict[str, str | None] = {}

        def take(scope: str, name: str | None) -> None:
            settled[scope] = name
            if name is not None:
                left[name] -= 1

        def forced() -> None:
            changed = True
            while changed:
                changed = False
                for scope in scopes:
                    open_ = [name for name in options[scope] if left[name] > 0]
                    if scope not in settled and len(open_) <= 1:
                        take(scope, open_[0] if open_ else None)
                        if open_:
                            self._suffixed += open_[0] != scope
                            self._verbatim += open_[0] == scope
                        changed = True

        forced()
        while undecided := [scope for scope in scopes if scope not in settled]:
            scope = undecided[0]
            if self._suffixed and not self._verbatim:
                take(scope, _UNIQUE_SUFFIX.sub("", scope))
            elif self._verbatim and not self._suffixed:
                take(scope, scope)
            else:
                settled[scope] = None  # either layer: neither is credited with it
            forced()
        return settled

    def layer_of(self, tensor_name: str) -> str | None:
        """The Keras layer (hierarchical path) whose scope made ``tensor_name``; None for a
        tensor of no single layer (a converter's own transposes, a shared layer's)."""
        scope = _scopes(tensor_name)[0]
        found = None
        for depth in range(1, len(scope) + 1):
            call = self._layer.get(scope[:depth])
            if call is None:
                break
            if (path := "/".join(call)) in self.paths:
                found = path
        return found


def last_of_each_layer(expected: Sequence[ExpectedLayer], names: Sequence[str]) -> set[str]:
    """Among tensor names in execution order, the last each layer's scope made."""
    scopes = LayerScopes(expected, names)
    last = {scopes.layer_of(name): name for name in names}
    return {name for path, name in last.items() if path is not None}


NOT_ITS_SHAPE = "its tensor's shape when run is not the layer's"
UNTOLD_LAYOUT = "its layout cannot be told from its shape"


def as_layer(
    array_shape: tuple[int, ...], wanted: tuple[int, ...], layout: Layout | None = None
) -> tuple[int, ...] | str:
    """How to lay a tensor out as the layer's (the permutation of its axes): as it is, or
    channels-first turned back (ONNX); or why it cannot be (``NOT_ITS_SHAPE``). ``layout`` is
    the tensor's as its graph tells it (engine/tensor_layouts.py), None where it does not: a
    shape the same both ways (H, W and C equal) is then ``UNTOLD_LAYOUT``, never guessed."""
    identity = tuple(range(len(wanted)))
    if len(wanted) != 4:
        return identity if array_shape == wanted else NOT_ITS_SHAPE
    last = array_shape == wanted
    first = array_shape == (wanted[0], wanted[3], wanted[1], wanted[2])
    if last and (layout == CHANNELS_LAST or (layout is None and not first)):
        return identity
    if first and (layout == CHANNELS_FIRST or (layout is None and not last)):
        return (0, 2, 3, 1)
    return UNTOLD_LAYOUT if last and first and layout is None else NOT_ITS_SHAPE


def match_layers(
    expected: Sequence[ExpectedLayer],
    tensors: Sequence[RuntimeTensor],
    finals: Sequence[RuntimeTensor] = (),
    names: Sequence[str] | None = None,
    layouts: Mapping[str, Layout] | None = None,
) -> tuple[dict[str, tuple[RuntimeTensor, tuple[int, ...]]], list[str]]:
    """Each expected layer's tensor (the last its scope made, of its shape) and layout; and
    the layers that have none (fused away, or ambiguous: a shared layer's calls). ``finals``
    are the model's outputs, each named by the layer that gives it: the converter names them
    after the signature, and a layer's last op (a sigmoid) may be the output's alone.
    ``names``: every tensor name of the converted model in execution order, where
    ``tensors`` are only some of them (those ``last_of_each_layer`` chose): the scopes are
    settled on all of them, as they were for the choice. ``layouts``: each tensor's layout
    (by key) as the converted model's graph tells it; the outputs are the model's maps,
    channels-last."""
    bases, paths = _layer_paths(expected)
    scopes = LayerScopes(expected, names if names is not None else [t.name for t in tensors])
    last: dict[str, RuntimeTensor] = {}
    for tensor in tensors:
        if (path := scopes.layer_of(tensor.name)) is not None:
            last[path] = tensor
    last.update({tensor.name: tensor for tensor in finals if tensor.name in paths})
    told = {id(tensor): layouts.get(tensor.key) for tensor in tensors} if layouts else {}
    told.update({id(tensor): CHANNELS_LAST for tensor in finals})
    matched: dict[str, tuple[RuntimeTensor, tuple[int, ...]]] = {}
    unmatched = []
    for layer, base in zip(expected, bases, strict=True):
        found = last.get(base) if base in paths else None
        layout = as_layer(found.shape, layer.shape, told.get(id(found))) if found else ""
        if found is None or isinstance(layout, str):
            unmatched.append(layer.name)
        else:
            matched[layer.name] = (found, layout)
    return matched, unmatched
