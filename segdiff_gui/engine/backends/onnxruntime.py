"""ONNX Runtime: the model converted to ONNX (Keras's export, tf2onnx), run by
``onnxruntime``'s CPU execution provider, or its CUDA provider where installed
(onnxruntime-gpu) with no fall-back to the CPU for any node. ``threads`` is the intra-op
thread count, ``determinism`` ONNX Runtime's deterministic compute, ``tf32`` the CUDA
provider's TF32 switch."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnxruntime as ort

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import RunError
from segdiff_gui.engine.backends.converted import ConvertedBackend, Session
from segdiff_gui.engine.gpu_identity import gpu_identities
from segdiff_gui.engine.tensor_matching import RuntimeTensor

__all__ = ["OnnxRuntimeBackend"]

_CPU = "CPUExecutionProvider"
_CUDA = "CUDAExecutionProvider"


# The operator sets ONNX Runtime implements itself; any other domain needs a custom op
# library, which is code segdiff never loads.
_BUILTIN_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})


def _graphs(graph: Any) -> Iterator[Any]:
    """``graph`` and every subgraph of its nodes' attributes (If, Loop, Scan bodies)."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _tensors(graph: Any) -> Iterator[Any]:
    """Every tensor a graph holds: initializers, sparse ones' parts, node attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for sparse in (attribute.sparse_tensor, *attribute.sparse_tensors):
                yield from (sparse.values, sparse.indices)


def self_contained(data: bytes) -> str:
    """What in an ONNX model would make ONNX Runtime read a file or load code ("" when
    nothing): a tensor kept as external data (a path, resolved from the working folder) or
    an operator of a domain it does not implement itself."""
    import onnx

    try:
        model = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001 - protobuf raises its own DecodeError types
        return "is not an ONNX model"
    # A model's own functions are graphs too, called under their domain: no code.
    known = _BUILTIN_DOMAINS | {function.domain for function in model.functions}
    nodes = [node for function in model.functions for node in function.node]
    for graph in _graphs(model.graph):
        for tensor in _tensors(graph):
            if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
                return f"keeps tensor {tensor.name[:80]!r} as external data (a file outside it)"
        nodes.extend(graph.node)
    for node in nodes:
        if node.domain not in known:
            return f"uses operator domain {node.domain[:80]!r}, which needs a custom op library"
    return ""


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
        order), added as graph outputs of a copy of the model and returned by one run."""
        import onnx

        model = onnx.load_from_string(data)
        typed = {
            info.name: info
            for info in onnx.shape_inference.infer_shapes(model).graph.value_info
            if info.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        }
        outputs = [output.name for output in model.graph.output]
        order = [name for node in model.graph.node for name in node.output if name in typed]
        extra = [name for name in order if name in choose(order) and name not in outputs]
        model.graph.output.extend(typed[name] for name in extra)
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
            )
            for name, array in zip(extra, arrays[len(outputs) :], strict=True)
        ]
        return arrays[: len(outputs)], tensors

    def _read_back(self) -> dict[str, Any]:
        """The thread count and determinism of the session that computed the last batch, as
        ONNX Runtime reports them (a child's runs may differ in them: each has its own)."""
        assert self.session_used is not None
        options = self._options_of[self.session_used]
        threads, deterministic = options.intra_op_num_threads, options.use_deterministic_compute
        return {
            "onnxruntime_threads": threads or "ONNX Runtime's default",
            "onnxruntime_deterministic_compute": deterministic,
            "intra_op_threads": threads,
            "op_determinism": deterministic,
        }

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        return {
            **self.conversion_facts(),
            "onnxruntime_provider": _CUDA if config.is_gpu else _CPU,
            **self._read_back(),
            "onnxruntime_tf32": config.tf32 if config.is_gpu else "n/a (CPU)",
            "placement": f"every node on {config.device}" if config.is_gpu else "cpu",
        }


BACKEND = OnnxRuntimeBackend
