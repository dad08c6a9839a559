"""ONNX Runtime: the model converted to ONNX (Keras's export, tf2onnx), run by
``onnxruntime``'s CPU execution provider, or its CUDA provider where installed
(onnxruntime-gpu) with no fall-back to the CPU for any node. ``threads`` is the intra-op
thread count, ``determinism`` ONNX Runtime's deterministic compute, ``tf32`` the CUDA
provider's TF32 switch, ``graph_optimization`` its session's graph optimisation level (unset:
its default, all), read back from the session. The user's own ``.onnx`` runs so as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import RunError
from segdiff_gui.engine.backends.converted import ConvertedBackend, Session
from segdiff_gui.engine.gpu_identity import gpu_identities
from segdiff_gui.engine.tensor_matching import RuntimeTensor
from segdiff_gui.io.artefacts import self_contained

__all__ = ["OnnxRuntimeBackend"]

_CPU = "CPUExecutionProvider"
# The graph_optimization knob's values as ONNX Runtime's levels.
_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "layout": ort.GraphOptimizationLevel.ORT_ENABLE_LAYOUT,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
_LEVEL_NAMES = {level: name for name, level in _LEVELS.items()}
_CUDA = "CUDAExecutionProvider"


def _gpu_index(device: str) -> int:
    return int(device.split(":", 1)[1])


class OnnxRuntimeBackend(ConvertedBackend):
    name = "onnxruntime"

    def __init__(self) -> None:
        super().__init__()
        # Each session's options as ONNX Runtime reports them: a run's provenance reads back
        # those of the session that computed it.
        self._options_of: dict[Session, ort.SessionOptions] = {}

    def devices(self) -> list[dict[str, Any]]:
        devices = [self.cpu_device()]
        if _CUDA in ort.get_available_providers():
            for gpu in gpu_identities():
                devices.append(
                    {
                        "name": f"gpu:{gpu['index']}",
                        "type": "GPU",
                        "description": gpu["name"],
                        "compute_capability": str(gpu["compute_capability"]).split("."),
                        "identity": gpu,
                    }
                )
        return devices

    def facts(self) -> dict[str, Any]:
        return {
            "runtime_version": ort.__version__,
            "onnxruntime_version": ort.__version__,
            "onnxruntime_providers": list(ort.get_available_providers()),
        }

    def output_device(self, config: RunConfig) -> str:
        return config.device if config.is_gpu else "cpu:0"

    def _options(self, config: RunConfig) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.intra_op_num_threads = config.threads  # 0: ONNX Runtime's default
        options.use_deterministic_compute = config.determinism
        if config.graph_optimization is not None:  # else its own default, read back
            options.graph_optimization_level = _LEVELS[config.graph_optimization]
        if config.is_gpu:
            # A node without a CUDA kernel is an error, never a quiet run on the CPU.
            options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        return options

    def _providers(self, config: RunConfig) -> list[Any]:
        if not config.is_gpu:
            return [_CPU]
        if _CUDA not in ort.get_available_providers():
            raise RunError(
                f"{config.device} requested but this onnxruntime has no CUDA execution provider "
                "(install onnxruntime-gpu); not falling back"
            )
        settings = {"device_id": str(_gpu_index(config.device)), "use_tf32": str(int(config.tf32))}
        return [(_CUDA, settings)]

    def refuses_artefact(self, data: bytes) -> str:
        return self_contained(data)

    def open_session(self, data: bytes, config: RunConfig) -> Session:
        session = ort.InferenceSession(
            data, self._options(config), providers=self._providers(config)
        )
        wanted = _CUDA if config.is_gpu else _CPU
        if session.get_providers()[0] != wanted:
            raise RunError(f"ONNX Runtime opened {session.get_providers()[0]}, not {wanted}")
        (model_input,) = session.get_inputs()
        names = [output.name for output in session.get_outputs()]

        def run(batch: np.ndarray) -> list[np.ndarray]:
            return [np.asarray(array) for array in session.run(names, {model_input.name: batch})]

        self._options_of[run] = session.get_session_options()
        return run

    def intermediates(
        self,
        data: bytes,
        batch: np.ndarray,
        config: RunConfig,
        choose: Callable[[list[str]], set[str]] = set,
    ) -> tuple[list[np.ndarray], list[RuntimeTensor]]:
        """The tensors ``choose`` picks among the graph's float node outputs (in topological
        order; the graph's own outputs and the node outputs shape inference could not type
        among them), added as graph outputs of a copy of the model and returned by one run."""
        import onnx

        untyped = onnx.TensorProto.UNDEFINED  # what shape inference could not type
        model = onnx.load_from_string(data)
        described = {
            info.name: info.type.tensor_type.elem_type
            for info in (*onnx.shape_inference.infer_shapes(model).graph.value_info,
                         *model.graph.output)
        }  # fmt: skip
        outputs = [output.name for output in model.graph.output]
        order = [
            name
            for node in model.graph.node
            for name in node.output
            if name and described.get(name, untyped) in (untyped, onnx.TensorProto.FLOAT)
        ]
        chosen = choose(order)
        extra = [name for name in order if name in chosen and name not in outputs]
        # A value shape inference did not describe is returned all the same, typed when run.
        model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in extra)
        session = ort.InferenceSession(
            model.SerializeToString(), self._options(config), providers=self._providers(config)
        )
        (model_input,) = session.get_inputs()
        results = session.run([*outputs, *extra], {model_input.name: batch})
        arrays = [np.asarray(array) for array in results]
        tensors = [
            RuntimeTensor(
                name,
                tuple(int(d) for d in array.shape),
                array.dtype.name,
                functools.partial(np.asarray, array, dtype=np.float32),
                key=name,
            )
            for name, array in zip([*outputs, *extra], arrays, strict=True)
            if name in chosen
        ]
        return arrays[: len(outputs)], tensors

    def _read_back(self) -> dict[str, Any]:
        """The thread count and determinism of the session that computed the last batch, as
        ONNX Runtime reports them (a child's runs may differ in them: each has its own)."""
        assert self.session_used is not None
        options = self._options_of[self.session_used]
        threads, deterministic = options.intra_op_num_threads, options.use_deterministic_compute
        level = _LEVEL_NAMES.get(
            options.graph_optimization_level, str(options.graph_optimization_level)
        )
        return {
            "onnxruntime_graph_optimization": level,
            "onnxruntime_threads": threads or "ONNX Runtime's default",
            "onnxruntime_deterministic_compute": deterministic,
            "intra_op_threads": threads,
            "op_determinism": deterministic,
        }

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        read = self._read_back()
        asked = config.graph_optimization
        if asked is not None and read["onnxruntime_graph_optimization"] != asked:
            raise RunError(
                f"graph_optimization={asked}: ONNX Runtime's session optimised the graph at "
                f"{read['onnxruntime_graph_optimization']}; leave it at its default"
            )
        return {
            **self.conversion_facts(),
            "onnxruntime_provider": _CUDA if config.is_gpu else _CPU,
            **read,
            "onnxruntime_tf32": config.tf32 if config.is_gpu else "n/a (CPU)",
            "placement": f"every node on {config.device}" if config.is_gpu else "cpu",
        }


BACKEND = OnnxRuntimeBackend
