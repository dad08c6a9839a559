"""LiteRT (ai-edge-litert's interpreter, TFLite's successor): the model converted to a
``.tflite`` flatbuffer in float32, with float16 weights, dynamic-range int8 or full int8, or
the user's own ``.tflite`` as it is, run on the CPU with XNNPACK (the interpreter's default
delegate, or as ``xnnpack`` asks: ``off`` is the interpreter's builtin kernels alone),
``threads`` threads. Whether XNNPACK took the graph is read back from the interpreter's
execution plan (a ``DELEGATE`` node), never assumed."""

from __future__ import annotations

import functools
import importlib.metadata
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import first_line
from segdiff_gui.engine.backends.base import RunError
from segdiff_gui.engine.backends.converted import ConvertedBackend, Session
from segdiff_gui.engine.tensor_matching import RuntimeTensor

__all__ = ["LiteRTBackend"]

_SIGNATURE = "serving_default"
# The interpreter's op resolver for each ``xnnpack`` value (None: its default, AUTO, which
# applies XNNPACK; BUILTIN asks for the default delegates explicitly).
_RESOLVER = {
    None: OpResolverType.AUTO,
    "on": OpResolverType.BUILTIN,
    "off": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
}
_OUTPUT_INDEX = re.compile(r"(\d+)$")


def _position(name: str) -> int:
    """Keras's export names outputs ``output_0``, ``output_1`` … in the model's order."""
    match = _OUTPUT_INDEX.search(name)
    return int(match.group(1)) if match else 0


class LiteRTBackend(ConvertedBackend):
    """Every LiteRT conversion a child runs (float32 … full int8: one child for the four)."""

    name = "litert"

    def devices(self) -> list[dict[str, Any]]:
        return [self.cpu_device()]

    def facts(self) -> dict[str, Any]:
        version = importlib.metadata.version("ai-edge-litert")
        return {"runtime_version": version, "litert_version": version}

    def open_session(self, data: bytes, config: RunConfig) -> Session:
        # num_threads None: the interpreter's own choice (threads=0, as TensorFlow's default).
        interpreter = Interpreter(
            model_content=data,
            num_threads=config.threads or None,
            experimental_op_resolver_type=_RESOLVER[config.xnnpack],
        )
        return _own_session(interpreter) if self.own is not None else _session(interpreter)

    def refuses_artefact(self, data: bytes) -> str:
        """A flatbuffer the interpreter does not take (its verifier's, or an op it lacks: a
        custom op would need code segdiff never loads)."""
        try:
            Interpreter(model_content=data)
        except Exception as error:  # noqa: BLE001 - the interpreter raises ValueError, RuntimeError
            return f"cannot be opened by LiteRT ({first_line(error)})"
        return ""

    def quantized_tensors(self, data: bytes) -> int:
        """Tensors stored in int8 or float16 (the quantized weights and, for full int8, the
        activations)."""
        details = Interpreter(model_content=data).get_tensor_details()
        return sum(np.dtype(d["dtype"]) in (np.int8, np.float16) for d in details)

    def intermediates(
        self,
        data: bytes,
        batch: np.ndarray,
        config: RunConfig,
        choose: Callable[[list[str]], set[str]] = set,
    ) -> tuple[list[np.ndarray], list[RuntimeTensor]]:
        """Every tensor the interpreter computed, kept by ``experimental_preserve_all_tensors``
        (XNNPACK still runs: the delegate then leaves each op's output in its tensor)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "for debugging purposes only"
            interpreter = Interpreter(
                model_content=data,
                num_threads=config.threads or None,
                experimental_preserve_all_tensors=True,
            )
        outputs = _session(interpreter)(batch)
        details = {detail["index"]: detail for detail in interpreter.get_tensor_details()}
        tensors, seen = [], set()
        for op in interpreter._get_ops_details():  # execution order; no public equivalent
            for index in op["outputs"]:
                detail = details.get(index)
                if index in seen or detail is None:
                    continue
                seen.add(index)
                if np.dtype(detail["dtype"]).kind not in "fiu":
                    continue
                scale, zero_point = detail["quantization"]
                tensors.append(
                    RuntimeTensor(
                        detail["name"],
                        tuple(int(d) for d in detail["shape"]),
                        np.dtype(detail["dtype"]).name,
                        functools.partial(_dequantized, interpreter, detail),
                        key=str(index),
                        scale=float(scale),
                        zero_point=int(zero_point),
                    )
                )
        return outputs, tensors

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        assert self.session_used is not None
        delegated = _delegated(self.session_used.interpreter)  # type: ignore[attr-defined]
        if config.xnnpack is not None and delegated != (config.xnnpack == "on"):
            raise RunError(
                f"xnnpack={config.xnnpack}: LiteRT's interpreter "
                f"{'delegated' if delegated else 'did not delegate'} this model to XNNPACK; "
                "leave xnnpack at its default"
            )
        kernels = "XNNPACK" if delegated else "the interpreter's builtin kernels"
        whose = "the interpreter's default" if config.xnnpack is None else "set"
        return {
            **self.conversion_facts(),
            "litert_threads": config.threads or "the interpreter's default",
            "intra_op_threads": config.threads,  # the run's own: a child's runs may differ
            "litert_xnnpack": delegated,
            "delegate": f"{kernels} ({whose})",
            "placement": f"cpu (LiteRT interpreter, {kernels})",
        }


def _dequantized(interpreter: Interpreter, detail: dict[str, Any]) -> np.ndarray:
    """A tensor as float32: an int8 one through its scale and zero point."""
    values = np.array(interpreter.get_tensor(detail["index"]), copy=True)
    scale, zero_point = detail["quantization"]
    if scale:
        return ((values.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)).astype(
            np.float32
        )
    return values.astype(np.float32)


def _delegated(interpreter: Interpreter) -> bool:
    """Whether the interpreter's execution plan runs (part of) the graph in a delegate
    (XNNPACK, the only one it is given): a ``DELEGATE`` node replaces the ops it took."""
    return any(op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details())


def _own_session(interpreter: Interpreter) -> Session:
    """The user's own ``.tflite`` as its Python users run it: its input resized to the batch
    where its batch is free, ``set_tensor``, ``invoke``, each output by ``get_tensor`` in the
    order of the graph's outputs."""
    (model_input,) = interpreter.get_input_details()
    outputs = [detail["index"] for detail in interpreter.get_output_details()]
    free = int(model_input["shape_signature"][0]) < 0
    allocated: list[tuple[int, ...]] = []  # the input shape the tensors are allocated for

    def run(batch: np.ndarray) -> list[np.ndarray]:
        if allocated != [batch.shape]:
            current = tuple(int(d) for d in model_input["shape"]) if not allocated else allocated[0]
            if current != batch.shape:
                if not free:
                    raise RunError(
                        f"the LiteRT model has a fixed batch of {current[0]}; "
                        f"batch={batch.shape[0]} cannot run it"
                    )
                interpreter.resize_tensor_input(model_input["index"], batch.shape)
            interpreter.allocate_tensors()
            allocated[:] = [batch.shape]
        interpreter.set_tensor(model_input["index"], batch)
        interpreter.invoke()
        # Copies: the interpreter reuses its output buffers on the next call.
        return [np.array(interpreter.get_tensor(index), copy=True) for index in outputs]

    run.interpreter = interpreter  # type: ignore[attr-defined]  # kept alive with run
    return run


def _session(interpreter: Interpreter) -> Session:
    """The interpreter's serving signature as a batch-in, outputs-out callable."""
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


BACKEND = LiteRTBackend
