"""A run's configuration probed layer by layer, in the child that would run it.

The batch, device, precision, XLA and the process-level knobs are the run's own; every layer's
output for the target image goes into the cache's layer store as it comes (one layer at a
time), then the probe's final map is checked bit for bit against the plain run of the same
configuration: the cache's, or computed by this child first where none is cached (one child
for both, not a run child and then a probe child); a probe that changed what it measures says
so.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, cast

import keras

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import PlannedRun
from segdiff_gui.core.protocol import BatchProgress
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.engine.artefact_model import artefact_of, keras_loaded
from segdiff_gui.engine.artefact_probe import artefact_probe_run
from segdiff_gui.engine.converted_probe import converted_probe_run
from segdiff_gui.engine.layer_capture import LayerOutput, run_layer_by_layer, tappable_graph
from segdiff_gui.engine.models import computing_layers
from segdiff_gui.engine.probe_finish import finish_probe, plain_map
from segdiff_gui.storage.layers import LayerStore, probe_key

if TYPE_CHECKING:
    from segdiff_gui.engine.backends.converted import ConvertedBackend
    from segdiff_gui.engine.probe_context import ProbeContext

__all__ = ["probe_run"]


def probe_run(runner: ProbeContext, run: PlannedRun) -> str:
    """Probe ``run`` into the layer store; returns the device it ran on."""
    job, backend, config = runner.job, runner.backend, run.computed
    if (artefact := artefact_of(runner.model)) is not None:  # the user's own, by its source
        if not backend.probes_own_tensors:
            raise InputError(
                artefact.path,
                f"runs under {RUNTIMES[config.runtime].title}, whose intermediate tensors "
                "segdiff does not read yet: compare its layers under LiteRT or ONNX Runtime",
            )
        return artefact_probe_run(runner, run, cast("ConvertedBackend", backend))
    if backend.probes_own_tensors:  # LiteRT, ONNX Runtime: their own tensors
        return converted_probe_run(runner, run, cast("ConvertedBackend", backend))
    runner.check_device(config)
    loaded = keras_loaded(runner.model_on(config.device))
    if backend.probe_refusal:
        raise InputError(loaded.path, backend.probe_refusal)
    if loaded.keras_model is None:
        raise InputError(
            loaded.path,
            "is a TensorFlow SavedModel: its graph has no Keras layers to tap; the .keras or "
            ".h5 model it was saved from can be probed layer by layer",
        )
    model = loaded.model_for(config.precision, config.keep_float32)
    tappable_graph(model, loaded.path)
    plain = plain_map(runner, run)
    batch = runner.batch_for(run)
    call = backend.layer_call(config)
    position, total = run.position, max(len(computing_layers(model)), 1)
    store = LayerStore(runner.cache)
    key = probe_key(run.key)
    started = time.perf_counter()
    with store.write_probe(key, job.probe_memory_budget) as writer:

        def emit(output: LayerOutput) -> None:
            value = output.value
            shape = tuple(int(d) for d in value.shape)
            target = value[position] if shape and shape[0] == len(run.batch) else value
            array = backend.to_numpy(target)
            dtype = keras.backend.standardize_dtype(value.dtype)
            writer.add(output.name, output.class_name, dtype, shape, array)
            step = min(writer.count, total)
            runner.channel.send(BatchProgress(run.key, step, total, f"layer {output.name}"))

        with backend.probe_scope(config), backend.emulation(config):
            outputs = run_layer_by_layer(model, [backend.probe_input(batch, config)], call, emit)
            raw = backend.to_numpy(outputs[runner.output_index][position])
        finish_probe(runner, run, writer, key, raw=raw, plain=plain, started=started)
    return config.device
