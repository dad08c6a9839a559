"""Keras on OpenVINO (Keras 3's inference-only backend): the same model, compiled by
OpenVINO for its CPU plugin at the first batch of each shape (``model.predict`` does it and
keeps the compiled model), computed by OpenVINO's own kernels in the inference precision its
CPU plugin chooses: bf16 on a CPU with AVX-512 BF16 or AMX, f32 elsewhere
(core/runtime_defaults.py), or the one the run asks for (``inference_precision``).

Keras compiles with ``openvino.compile_model(model, "CPU")`` and passes no property, so a user
who wants another precision has no argument to give; a run that asks for one has that very
call given ``INFERENCE_PRECISION_HINT`` while its ``model.predict`` runs (:func:`_hinted`),
nothing else changed. Whatever was asked, the compiled model's own
``INFERENCE_PRECISION_HINT`` is read back and recorded; so is its ``INFERENCE_NUM_THREADS``
(``threads``, handed to the same call where set).

The user's own OpenVINO IR (``.xml`` and ``.bin``) or ``.onnx`` is no Keras model:
it is compiled as its users compile it, ``openvino.Core().compile_model(model, "CPU")``, from
the bytes the run was planned with, with the same two properties where set and read back the
same way; Keras is not imported for it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openvino

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.artefact_model import LoadedArtefact, artefact_of
from segdiff_gui.engine.backends.base import Backend, Outputs, RunError
from segdiff_gui.engine.facts import cpu_model

__all__ = ["OpenVinoBackend"]

_HINT = "INFERENCE_PRECISION_HINT"
# A model with a layer that does not support compilation is predicted op by op: Keras's
# OpenVINO backend then compiles each op alone with this hint (``convert_to_numpy``).
_OP_BY_OP_PRECISION = "f32"


_THREADS = "INFERENCE_NUM_THREADS"


def _properties(config: RunConfig) -> dict[str, Any]:
    """The compile_model properties a run asks for: none where it leaves them at OpenVINO's
    defaults (its inference precision and thread count are then the CPU plugin's)."""
    asked: dict[str, Any] = {}
    if config.inference_precision is not None:
        asked[_HINT] = config.inference_precision
    if config.threads:
        asked[_THREADS] = config.threads
    return asked


@contextlib.contextmanager
def _hinted(properties: dict[str, Any]) -> Iterator[None]:
    """While it lasts, ``openvino.compile_model`` (what Keras's ``model.predict`` calls)
    compiles with ``properties`` added; none: as it is."""
    if not properties:
        yield
        return
    original = openvino.compile_model

    def compile_model(model: Any, device_name: str | None = "AUTO", config: Any = None) -> Any:
        return original(model, device_name, {**(config or {}), **properties})

    openvino.compile_model = compile_model
    try:
        yield
    finally:
        openvino.compile_model = original


def _precision_of(compiled: Any) -> str:
    """The compiled model's inference precision as OpenVINO writes it: ``bf16``, ``f32``."""
    return str(compiled.get_property(_HINT).get_type_name())


class OpenVinoBackend(Backend):
    name = "openvino"

    def __init__(self) -> None:
        # What each forward pass computed in, read back after its first batch.
        self._in_effect: dict[tuple[Any, ...], dict[str, Any]] = {}
        # The hint each Keras model's kept compiled model was compiled with (Keras keeps one
        # per model and input shape; a run asking for another precision compiles again).
        self._compiled_with: dict[int, tuple[tuple[str, Any], ...]] = {}

    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        return None  # every knob it takes is a run's (core/runtimes.py refuses the rest)

    def devices(self) -> list[dict[str, Any]]:
        return [
            {"name": "cpu", "type": "CPU", "description": cpu_model(), "compute_capability": []}
        ]

    def facts(self) -> dict[str, Any]:
        build = openvino.get_version()
        core = openvino.Core()
        return {
            "runtime_version": build.split("-", 1)[0],
            "openvino_build": build,
            "openvino_devices": list(core.available_devices),
            # What its CPU plugin compiles a model in when nobody asks, on this CPU.
            "openvino_default_precision": str(core.get_property("CPU", _HINT).get_type_name()),
        }

    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        if (own := artefact_of(model)) is not None:
            return self._own_forward(own, config)
        keras_model = model.model_for(config.precision, config.keep_float32)
        names = model.output_names
        properties = _properties(config)
        asked = tuple(sorted(properties.items()))
        key = config.forward_key()

        def run(batch: np.ndarray) -> Outputs:
            if self._compiled_with.get(id(keras_model), asked) != asked:
                keras_model.ov_compiled_model = None  # compiled with other properties
            self._compiled_with[id(keras_model)] = asked
            # One batch of exactly these inputs, as the user's model.predict computes it.
            with _hinted(properties):
                raw = keras_model.predict(batch, batch_size=len(batch), verbose=0)
            compiled = getattr(keras_model, "ov_compiled_model", None)
            self._in_effect[key] = _read_back(compiled, config)
            outputs = [np.asarray(output) for output in model.output_list(raw, names)]
            return Outputs(
                outputs,
                tuple("cpu:0" for _ in outputs),
                tuple(str(output.dtype) for output in outputs),
            )

        return run

    def _own_forward(
        self, own: LoadedArtefact, config: RunConfig
    ) -> Callable[[np.ndarray], Outputs]:
        """The user's IR or ``.onnx`` compiled as ``Core().compile_model(model, "CPU")``
        compiles it, with the properties the run asks for; each batch one inference."""
        core = openvino.Core()
        if own.weights:
            weights = openvino.Tensor(np.frombuffer(own.weights, dtype=np.uint8))
            graph = core.read_model(model=own.data.decode("utf-8"), weights=weights)
        else:
            graph = core.read_model(own.data)
        compiled = core.compile_model(graph, "CPU", _properties(config))
        self._in_effect[config.forward_key()] = {
            **_read_back(compiled, config),
            "artefact": f"{own.facts.format.title}, run as it is (not converted)",
        }
        outputs = list(compiled.outputs)

        def run(batch: np.ndarray) -> Outputs:
            result = compiled(batch)
            arrays = [np.array(result[output], copy=True) for output in outputs]
            dtypes = tuple(str(array.dtype) for array in arrays)
            return Outputs(arrays, tuple("cpu:0" for _ in arrays), dtypes)

        return run

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        return {"cpu:0"}  # its compiled model lives in the CPU plugin's memory

    def predict_compiles(self, model: Any) -> bool | None:
        return None  # XLA means nothing here

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        keras = sys.modules.get("keras")  # none for the user's own IR or .onnx
        return {
            "placement": "OpenVINO CPU plugin",
            **({"keras_backend": keras.backend.backend()} if keras is not None else {}),
            **self._in_effect.get(config.forward_key(), {}),
        }


def _read_back(compiled: Any, config: RunConfig) -> dict[str, Any]:
    """What the forward pass computed in and on how many threads, from its compiled model
    (Keras's kept one, or the artefact's); a value asked for and not given is the run's
    failure (another computation than its key's)."""
    asked = config.inference_precision
    if compiled is None:  # a layer without compilation support: op by op
        precision, how = _OP_BY_OP_PRECISION, "op by op (Keras compiles each op in f32)"
        threads = None
    else:
        precision, how = _precision_of(compiled), "one compiled model"
        how += f", execution mode {compiled.get_property('EXECUTION_MODE_HINT').name}"
        threads = int(compiled.get_property(_THREADS))
    if asked is not None and precision != asked:
        raise RunError(
            f"inference_precision={asked}: OpenVINO's CPU plugin computes this model in "
            f"{precision} on this CPU ({how}), not in {asked}; leave inference_precision at "
            "its default or set it to what the CPU computes"
        )
    if config.threads and threads is not None and threads != config.threads:
        raise RunError(
            f"threads={config.threads}: OpenVINO's compiled model runs {threads} inference "
            "threads; leave threads at its default"
        )
    found: dict[str, Any] = {"inference_precision": precision, "openvino_compiled": how}
    if threads is not None:
        found["openvino_threads"] = threads  # what the CPU plugin chose, where not asked
        found["intra_op_threads"] = config.threads  # the run's own: 0 is the default
    return found


BACKEND = OpenVinoBackend
