"""The layer probe of a converted model (issue 16): the runtime's own intermediate tensors,
matched to the Keras model's layers, so a LiteRT or ONNX Runtime run is compared with Keras
layer by layer like any configuration.

LiteRT keeps every intermediate tensor when asked (``experimental_preserve_all_tensors``);
ONNX Runtime returns the ones added as graph outputs. A converter names each tensor after the
TensorFlow op it came from (``unet_1/enc1_1_1/Relu;unet_1/enc1_1_1/BiasAdd…``), whose name
scope is the Keras layer's (with a ``_1`` the tracing adds): a layer's output is the last
tensor in execution order its scope produced, if its shape is the layer's (ONNX's channels-
first tensors are turned back). A layer fused into another (an activation into its
convolution, a batch normalisation folded away) has no tensor of its own: the probe lists it
as unmatched and the comparison leaves it out, saying so.

The probe's final map is checked bit for bit against the plain run's, as for Keras: exposing a
tensor can stop a fusion, and then the probe says the numerics changed.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import PlannedRun
from segdiff_gui.core.protocol import BatchProgress
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.engine.layer_capture import LayerOutput, run_layer_by_layer, tappable_graph
from segdiff_gui.engine.outputs import to_probabilities
from segdiff_gui.storage.layers import LayerStore, probe_key

if TYPE_CHECKING:
    from segdiff_gui.engine.backends.converted import ConvertedBackend
    from segdiff_gui.engine.worker import JobRunner

__all__ = [
    "ExpectedLayer",
    "RuntimeTensor",
    "converted_probe_run",
    "last_of_each_layer",
    "layer_of",
    "match_layers",
]

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


def _expected_layers(runner: JobRunner, model: object, batch: np.ndarray) -> list[ExpectedLayer]:
    """The Keras model's layer outputs, named as the Keras probe names them (its own walk of
    the graph, on the CPU under TensorFlow; only names and shapes are kept)."""
    import tensorflow as tf

    found: list[ExpectedLayer] = []

    def emit(output: LayerOutput) -> None:
        shape = tuple(int(d) for d in output.value.shape)
        found.append(ExpectedLayer(output.name, output.class_name, shape))

    with tf.device("/CPU:0"):
        run_layer_by_layer(model, [tf.constant(batch)], lambda layer, a, k: layer(*a, **k), emit)
    return found


def output_layer_paths(model: object, prefix: str = "") -> list[str]:
    """The layer (hierarchical path, as the probe names it) that gives each of the model's
    outputs: a converter names the final tensors after the signature, not the layer."""
    paths = []
    for tensor in model.outputs:  # type: ignore[attr-defined]
        operation = tensor._keras_history[0]
        if hasattr(operation, "outputs") and hasattr(operation, "layers"):  # a nested model
            index = list(operation.outputs).index(tensor) if tensor in operation.outputs else 0
            paths.append(output_layer_paths(operation, f"{prefix}{operation.name}/")[index])
        else:
            paths.append(prefix + operation.name)
    return paths


def converted_probe_run(runner: JobRunner, run: PlannedRun, backend: ConvertedBackend) -> str:
    """Probe ``run`` (a converted runtime's) into the layer store; returns its device."""
    job, config = runner.job, run.config
    runner.check_device(config)
    loaded = runner.model_on(config.device)
    assert loaded.keras_model is not None
    try:
        plain = runner.cache.read_run(run.key).probabilities
    except KeyError:
        raise InputError(run.label, "has no plain run in the cache to check the probe on") from None
    tappable_graph(loaded.keras_model, loaded.path)
    batch = runner.batch_for(run)
    expected = _expected_layers(runner, loaded.keras_model, batch)
    converted = backend.artefact(loaded)
    started = time.perf_counter()
    outputs, tensors = backend.intermediates(
        converted.data, batch, config, lambda names: last_of_each_layer(expected, names)
    )
    finals = [
        RuntimeTensor(
            path, tuple(array.shape), array.dtype.name, functools.partial(np.asarray, array)
        )
        for path, array in zip(output_layer_paths(loaded.keras_model), outputs, strict=False)
    ]
    matched, unmatched = match_layers(expected, tensors, finals)
    position, total = config.position, max(len(expected), 1)
    store = LayerStore(runner.cache)
    key = probe_key(run.key)
    with store.write_probe(key, job.probe_memory_budget) as writer:
        for layer in expected:
            if layer.name not in matched:
                continue
            tensor, layout = matched[layer.name]
            values = np.transpose(tensor.read(), layout)
            target = values[position] if layer.shape and layer.shape[0] == config.batch else values
            writer.add(layer.name, layer.class_name, tensor.dtype, layer.shape, target)
            step = min(writer.count, total)
            runner.channel.send(BatchProgress(run.key, step, total, f"layer {layer.name}"))
        wall = time.perf_counter() - started
        name = loaded.output_names[runner.output_index]
        raw = outputs[runner.output_index][position]
        probabilities, _ = to_probabilities(
            loaded.path, name, raw, job.output, backend.quantized_output
        )
        assert plain is not None
        if probabilities.shape != plain.shape:
            raise InputError(run.label, "the probe's final map has another shape than its run's")
        check = compare_maps(plain, probabilities)
        writer.finish(
            {
                "run_key": run.key,
                "probe_key": key,
                "label": run.label,
                "config": config.to_dict(),
                "layers": writer.count,
                "unmatched": unmatched,
                "tensors_from": backend.runtime.title,
                "final": {
                    "bitwise_equal": check.bitwise_equal,
                    "differing_pixels": check.differing_pixels,
                    "max_ulp": check.max_ulp,
                },
                "wall_time_s": wall,
                "timestamp": local_timestamp(),
            },
            probabilities,
        )
    return "cpu:0" if not config.is_gpu else config.device
