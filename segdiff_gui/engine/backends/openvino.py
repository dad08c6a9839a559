"""Keras on OpenVINO (Keras 3's inference-only backend): the same model, compiled by
OpenVINO for its CPU plugin at the first batch of each shape (``model.predict`` does it and
keeps the compiled model), computed by OpenVINO's own kernels in the inference precision its
CPU plugin chooses: bf16 on a CPU with AVX-512 BF16 or AMX, f32 elsewhere
(core/runtime_defaults.py), or the one the run asks for (``inference_precision``).

Keras compiles with ``openvino.compile_model(model, "CPU")`` and passes no property, so a user
who wants another precision has no argument to give; a run that asks for one has that very
call given ``INFERENCE_PRECISION_HINT`` while its ``model.predict`` runs (:func:`_hinted`),
nothing else changed. Whatever was asked, the compiled model's own
``INFERENCE_PRECISION_HINT`` is read back and recorded."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keras
import numpy as np
import openvino

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import Backend, Outputs, RunError
from segdiff_gui.engine.facts import cpu_model

__all__ = ["OpenVinoBackend"]

_HINT = "INFERENCE_PRECISION_HINT"
# A model with a layer that does not support compilation is predicted op by op: Keras's
# OpenVINO backend then compiles each op alone with this hint (``convert_to_numpy``).
_OP_BY_OP_PRECISION = "f32"


@contextlib.contextmanager
def _hinted(precision: str | None) -> Iterator[None]:
    """While it lasts, ``openvino.compile_model`` (what Keras's ``model.predict`` calls)
    compiles with ``INFERENCE_PRECISION_HINT`` ``precision``; unset (``None``), as it is."""
    if precision is None:
        yield
        return
    original = openvino.compile_model

    def compile_model(model: Any, device_name: str | None = "AUTO", config: Any = None) -> Any:
        return original(model, device_name, {**(config or {}), _HINT: precision})

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
        self._compiled_with: dict[int, str | None] = {}

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
        keras_model = model.model_for(config.precision, config.keep_float32)
        names = model.output_names
        asked = config.inference_precision
        key = config.forward_key()

        def run(batch: np.ndarray) -> Outputs:
            if self._compiled_with.get(id(keras_model), asked) != asked:
                keras_model.ov_compiled_model = None  # compiled for another precision
            self._compiled_with[id(keras_model)] = asked
            # One batch of exactly these inputs, as the user's model.predict computes it.
            with _hinted(asked):
                raw = keras_model.predict(batch, batch_size=len(batch), verbose=0)
            self._in_effect[key] = _read_back(keras_model, asked)
            outputs = [np.asarray(output) for output in model.output_list(raw, names)]
            return Outputs(
                outputs,
                tuple("cpu:0" for _ in outputs),
                tuple(str(output.dtype) for output in outputs),
            )

        return run

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        return {"cpu:0"}  # its compiled model lives in the CPU plugin's memory

    def predict_compiles(self, model: Any) -> bool | None:
        return None  # XLA means nothing here

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        return {
            "placement": "OpenVINO CPU plugin",
            "keras_backend": keras.backend.backend(),
            **self._in_effect.get(config.forward_key(), {}),
        }


def _read_back(keras_model: Any, asked: str | None) -> dict[str, Any]:
    """What the forward pass computed in, from the compiled model Keras kept; a precision
    asked for and not given is the run's failure (another computation than its key's)."""
    compiled = getattr(keras_model, "ov_compiled_model", None)
    if compiled is None:  # a layer without compilation support: op by op
        precision, how = _OP_BY_OP_PRECISION, "op by op (Keras compiles each op in f32)"
    else:
        precision, how = _precision_of(compiled), "one compiled model"
        how += f", execution mode {compiled.get_property('EXECUTION_MODE_HINT').name}"
    if asked is not None and precision != asked:
        raise RunError(
            f"inference_precision={asked}: OpenVINO's CPU plugin computes this model in "
            f"{precision} on this CPU ({how}), not in {asked}; leave inference_precision at "
            "its default or set it to what the CPU computes"
        )
    return {"inference_precision": precision, "openvino_compiled": how}


BACKEND = OpenVinoBackend
