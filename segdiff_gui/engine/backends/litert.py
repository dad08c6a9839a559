"""LiteRT (ai-edge-litert's interpreter, TFLite's successor): the model converted to a
``.tflite`` flatbuffer in float32, with float16 weights, dynamic-range int8 or full int8,
run on the CPU with XNNPACK (the interpreter's default delegate), ``threads`` threads."""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import RunError
from segdiff_gui.engine.backends.converted import ConvertedBackend, Session

__all__ = ["LiteRTBackend"]

_SIGNATURE = "serving_default"
_OUTPUT_INDEX = re.compile(r"(\d+)$")


def _position(name: str) -> int:
    """Keras's export names outputs ``output_0``, ``output_1`` … in the model's order."""
    match = _OUTPUT_INDEX.search(name)
    return int(match.group(1)) if match else 0


class LiteRTBackend(ConvertedBackend):
    def devices(self) -> list[dict[str, Any]]:
        return [self.cpu_device()]

    def facts(self) -> dict[str, Any]:
        version = importlib.metadata.version("ai-edge-litert")
        return {
            "runtime_version": version,
            "litert_version": version,
            "intra_op_threads": self.settings.threads,
            "delegate": "XNNPACK (the interpreter's default)",
        }

    def open_session(self, data: bytes, config: RunConfig) -> Session:
        # num_threads None: the interpreter's own choice (threads=0, as TensorFlow's default).
        interpreter = Interpreter(model_content=data, num_threads=config.threads or None)
        signatures = interpreter.get_signature_list()
        name = _SIGNATURE if _SIGNATURE in signatures else next(iter(signatures))
        runner = interpreter.get_signature_runner(name)
        (input_name,) = signatures[name]["inputs"]
        outputs = sorted(signatures[name]["outputs"], key=_position)
        batch_dimension = int(interpreter.get_input_details()[0]["shape_signature"][0])

        def run(batch: np.ndarray) -> list[np.ndarray]:
            if batch_dimension > 0 and batch.shape[0] != batch_dimension:
                raise RunError(
                    f"the LiteRT model has a fixed batch of {batch_dimension} (the Keras model's "
                    f"input is fixed so); batch={batch.shape[0]} cannot run it"
                )
            result = runner(**{input_name: batch})
            # Copies: the interpreter reuses its output buffers on the next call.
            return [np.array(result[output], copy=True) for output in outputs]

        run.interpreter = interpreter  # type: ignore[attr-defined]  # kept alive with run
        return run

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        return {
            **self.conversion_facts(),
            "litert_threads": config.threads or "the interpreter's default",
            "placement": "cpu (LiteRT interpreter, XNNPACK)",
        }


BACKEND = LiteRTBackend
