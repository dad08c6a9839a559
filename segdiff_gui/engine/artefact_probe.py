"""The layer probe of the user's own artefact against its Keras source: the
runtime's own intermediate tensors of the artefact (LiteRT's, ONNX Runtime's, int8 ones
dequantized by their scale and zero point), each matched to the layer of the source it
computes by the graph (graph_matching.py), never by its name; a layer the graph does not say
is listed as unmatched, with why.

The child that runs the artefact loads the source too (Keras on TensorFlow, on the CPU, only
to walk its layers: their names, shapes and the layers each reads), held to the hash the runs
were planned with. Each matched tensor is stored under its layer's name, with the scale and
zero point it was quantized with and the artefact's node that computed it (Model Explorer's
id); the source's own probe (a Keras probe of the source's configuration) is the other side
of the comparison. As every probe, its final map is checked bit for bit against the plain run
of the artefact, and the tensors are held only as the converted probe holds them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import hash_model
from segdiff_gui.core.job import PlannedRun
from segdiff_gui.core.layer_stats import read_quantization
from segdiff_gui.core.protocol import BatchProgress
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.engine.artefact_model import LoadedArtefact
from segdiff_gui.engine.graph_matching import SourceLayer, match_by_graph
from segdiff_gui.engine.layer_capture import LayerOutput, run_layer_by_layer, tappable_graph
from segdiff_gui.engine.probe_finish import finish_probe, plain_map
from segdiff_gui.engine.tensor_matching import RuntimeTensor
from segdiff_gui.io.artefacts import artefact_graph
from segdiff_gui.storage.layers import LayerStore, probe_key
from segdiff_gui.storage.probe_files import ARTEFACT_MATCHING

if TYPE_CHECKING:
    from segdiff_gui.engine.backends.converted import ConvertedBackend
    from segdiff_gui.engine.probe_context import ProbeContext

__all__ = ["artefact_probe_run", "source_layers"]


def source_layers(runner: ProbeContext, batch: np.ndarray) -> list[SourceLayer]:
    """The source's layer outputs for ``batch`` as the Keras probe names them, with the
    outputs each reads and its activation (walked once on the CPU under TensorFlow; only
    names, shapes and the graph are kept). The source must be the file the runs were keyed
    with."""
    import tensorflow as tf

    from segdiff_gui.engine.models import load_model  # imports Keras

    source = runner.job.source
    assert source is not None
    path = Path(source.path)
    if hash_model(path) != source.sha256:
        raise InputError(path, "changed after segdiff planned the runs; run again")
    loaded = load_model(path, runner.job.trust_model)
    if loaded.keras_model is None:
        raise InputError(path, "is a TensorFlow SavedModel: its graph has no Keras layers")
    tappable_graph(loaded.keras_model, path)
    found: list[SourceLayer] = []

    def emit(output: LayerOutput) -> None:
        shape = tuple(int(d) for d in output.value.shape)
        found.append(
            SourceLayer(output.name, output.class_name, shape, output.inputs, output.activation)
        )

    with tf.device("/CPU:0"):
        model = loaded.keras_model
        run_layer_by_layer(model, [tf.constant(batch)], lambda layer, a, k: layer(*a, **k), emit)
    return found


def _quantization(tensor: RuntimeTensor) -> tuple[float, int] | None:
    """A quantized tensor's scale and zero point, as a probe stores them; a hostile file's
    (a scale not finite or not above 0, a zero point out of range) are not stored: a probe
    holds only what it reads back."""
    try:
        return read_quantization(tensor.scale or None, tensor.zero_point)
    except (ValueError, OverflowError):
        return None


def artefact_probe_run(runner: ProbeContext, run: PlannedRun, backend: ConvertedBackend) -> str:
    """Probe ``run`` (the user's artefact's) into the layer store, its tensors named by the
    source's layers they compute; returns its device."""
    job, config = runner.job, run.computed
    artefact = runner.model
    assert isinstance(artefact, LoadedArtefact)
    if job.source is None:
        raise InputError(
            artefact.path,
            "is your own artefact: its layers are compared with those of the Keras model it "
            "was converted from (its source), which was not given",
            fix="source",
        )
    runner.check_device(config)
    graph = artefact_graph(artefact.path, artefact.data)
    plain = plain_map(runner, run)
    batch = runner.batch_for(run)
    layers = source_layers(runner, batch)
    matched = match_by_graph(layers, graph)
    wanted = matched.tensor_keys()
    started = time.perf_counter()
    outputs, found = backend.intermediates(
        artefact.data, batch, config, lambda order: {n for n in order if n in wanted}
    )
    tensors = {tensor.key: tensor for tensor in found if tensor.key in wanted}
    # Each tensor's node: the operator whose output it is (Model Explorer colours that one).
    producers = {key: op.node for op in graph.ops for key in op.outputs}
    unmatched = dict(matched.unmatched)
    position, total = config.position, max(len(layers), 1)
    store = LayerStore(runner.cache)
    key = probe_key(run.key)
    with store.write_probe(key, job.probe_memory_budget) as writer:
        for layer in layers:
            if layer.name not in matched.tensors:
                continue
            fitting = matched.laid_out(layer.name, layer.shape, tensors)
            if isinstance(fitting, str):
                unmatched[layer.name] = fitting
                continue
            tensor, layout = fitting
            values = np.transpose(tensor.read(), layout)
            target = values[position]
            quantization = _quantization(tensor)
            writer.add(
                layer.name, layer.class_name, tensor.dtype, layer.shape, target,
                quantization, producers.get(tensor.key, matched.nodes.get(layer.name, "")),
            )  # fmt: skip
            step = min(writer.count, total)
            runner.channel.send(BatchProgress(run.key, step, total, f"layer {layer.name}"))
        raw = outputs[runner.output_index][position]
        order = [layer.name for layer in layers if layer.name in unmatched]
        title = RUNTIMES[config.runtime].family
        finish_probe(
            runner, run, writer, key, raw=raw, plain=plain, started=started,
            unmatched=order, unmatched_why={name: unmatched[name] for name in order},
            tensors_from=f"{artefact.path.name} ({title})", matching=ARTEFACT_MATCHING,
            artefact=True,
        )  # fmt: skip
    return "cpu:0" if not config.is_gpu else config.device
