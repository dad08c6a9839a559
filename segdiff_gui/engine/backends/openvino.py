"""Keras on OpenVINO (Keras 3's inference-only backend): the same model, compiled by
OpenVINO for its CPU plugin at the first batch of each shape (``model.predict`` does it and
keeps the compiled model), computed in float32 with OpenVINO's own kernels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
import openvino

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import Backend, Outputs
from segdiff_gui.engine.facts import cpu_model

__all__ = ["OpenVinoBackend"]


class OpenVinoBackend(Backend):
    name = "openvino"

    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        return None  # every knob it takes is a run's (core/runtimes.py refuses the rest)

    def devices(self) -> list[dict[str, Any]]:
        return [
            {"name": "cpu", "type": "CPU", "description": cpu_model(), "compute_capability": []}
        ]

    def facts(self) -> dict[str, Any]:
        build = openvino.get_version()
        return {
            "runtime_version": build.split("-", 1)[0],
            "openvino_build": build,
            "openvino_devices": list(openvino.Core().available_devices),
        }

    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        keras_model = model.model_for(config.precision, config.keep_float32)
        names = model.output_names

        def run(batch: np.ndarray) -> Outputs:
            # One batch of exactly these inputs, as the user's model.predict computes it.
            raw = keras_model.predict(batch, batch_size=len(batch), verbose=0)
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
        return {"placement": "OpenVINO CPU plugin", "keras_backend": keras.backend.backend()}


BACKEND = OpenVinoBackend
