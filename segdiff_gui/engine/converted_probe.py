"""The layer probe of a converted model: the runtime's own intermediate tensors,
matched to the Keras model's layers, so a LiteRT or ONNX Runtime run is compared with Keras
layer by layer like any configuration.

LiteRT keeps every intermediate tensor when asked (``experimental_preserve_all_tensors``);
ONNX Runtime returns the ones added as graph outputs. A converter names each tensor after the
TensorFlow op it came from (``unet_1/enc1_1_1/Relu;unet_1/enc1_1_1/BiasAdd…``), whose name
scope is the Keras layer's made unique by the tracing (tensor_matching.py says how each scope
is matched whole to one layer): a layer's output is the last tensor in execution order its
scope produced, if its shape is the layer's (ONNX's channels-first tensors are turned back,
their layout told by the converted model's graph: engine/tensor_layouts.py).
A layer fused into another (an activation into its convolution, a batch normalisation folded
away) has no tensor of its own: the probe lists it as unmatched and the comparison leaves it
out, saying so.

The probe's final map is checked bit for bit against the plain run's (the cache's, or computed
by this child first through the runtime's ordinary session, as for Keras): exposing a tensor
can stop a fusion, and then the probe says the numerics changed.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from segdiff_gui.core.job import PlannedRun
from segdiff_gui.core.protocol import BatchProgress
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.engine.artefact_model import keras_loaded
from segdiff_gui.engine.layer_capture import LayerOutput, run_layer_by_layer, tappable_graph
from segdiff_gui.engine.probe_finish import finish_probe, plain_map
from segdiff_gui.engine.tensor_layouts import tensor_layouts
from segdiff_gui.engine.tensor_matching import (
    ExpectedLayer,
    RuntimeTensor,
    last_of_each_layer,
    match_layers,
)
from segdiff_gui.io.artefacts import artefact_graph
from segdiff_gui.storage.layers import LayerStore, probe_key
from segdiff_gui.storage.probe_files import CONVERTED_MATCHING

if TYPE_CHECKING:
    from segdiff_gui.engine.backends.converted import ConvertedBackend
    from segdiff_gui.engine.probe_context import ProbeContext

__all__ = ["RuntimeTensor", "converted_probe_run"]


def _expected_layers(runner: ProbeContext, model: object, batch: np.ndarray) -> list[ExpectedLayer]:
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


def converted_probe_run(runner: ProbeContext, run: PlannedRun, backend: ConvertedBackend) -> str:
    """Probe ``run`` (a converted runtime's) into the layer store; returns its device."""
    job, config = runner.job, run.computed
    runner.check_device(config)
    loaded = keras_loaded(runner.model_on(config.device))
    assert loaded.keras_model is not None
    tappable_graph(loaded.keras_model, loaded.path)
    plain = plain_map(runner, run)
    batch = runner.batch_for(run)
    expected = _expected_layers(runner, loaded.keras_model, batch)
    converted = backend.artefact(loaded, config, batch.shape[1:])
    started = time.perf_counter()
    named: list[str] = []  # every tensor's name, where the runtime returns only those chosen

    def choose(names: list[str]) -> set[str]:
        named.extend(names)
        return last_of_each_layer(expected, names)

    outputs, tensors = backend.intermediates(converted.data, batch, config, choose)
    finals = [
        RuntimeTensor(
            path, tuple(array.shape), array.dtype.name, functools.partial(np.asarray, array)
        )
        for path, array in zip(output_layer_paths(loaded.keras_model), outputs, strict=False)
    ]
    conversion = RUNTIMES[config.runtime].conversion
    assert conversion is not None
    graph = artefact_graph(Path(f"{config.runtime}{conversion.suffix}"), converted.data)
    layouts = tensor_layouts(graph)
    matched, unmatched = match_layers(expected, tensors, finals, named or None, layouts)
    title = RUNTIMES[config.runtime].title  # the run's conversion: a child may run several
    position, total = run.position, max(len(expected), 1)
    store = LayerStore(runner.cache)
    key = probe_key(run.key)
    with store.write_probe(key, job.probe_memory_budget) as writer:
        for layer in expected:
            if layer.name not in matched:
                continue
            tensor, layout = matched[layer.name]
            values = np.transpose(tensor.read(), layout)
            target = (
                values[position] if layer.shape and layer.shape[0] == len(run.batch) else values
            )
            writer.add(layer.name, layer.class_name, tensor.dtype, layer.shape, target)
            step = min(writer.count, total)
            runner.channel.send(BatchProgress(run.key, step, total, f"layer {layer.name}"))
        assert plain is not None
        raw = outputs[runner.output_index][position]
        finish_probe(
            runner, run, writer, key, raw=raw, plain=plain, started=started,
            unmatched=unmatched, tensors_from=title, matching=CONVERTED_MATCHING,
        )  # fmt: skip
    return "cpu:0" if not config.is_gpu else config.device
