"""Keras on PyTorch: eager, on the device Keras is told (weights created there while the
model loads), with TF32, determinism, threads and oneDNN (mkldnn) set through PyTorch's own
switches and read back."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keras
import ml_dtypes
import numpy as np
import torch

from segdiff_gui.core import tf32
from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.backends.base import Backend, Outputs, RunError, short_device
from segdiff_gui.engine.facts import cpu_model
from segdiff_gui.engine.gpu_identity import identity_for, loaded_cuda_libraries

__all__ = ["TorchBackend"]


def _short(device: torch.device) -> str:
    return short_device(device.type, device.index or 0)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: widen exactly, then narrow
        return tensor.float().numpy().astype(ml_dtypes.bfloat16)
    return tensor.numpy()


@contextlib.contextmanager
def _inference_on(scope: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    """As the forward pass runs: no autograd, on the device."""
    with torch.inference_mode(), scope:
        yield


class TorchBackend(Backend):
    name = "torch"

    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        if settings.threads:
            torch.set_num_threads(settings.threads)
        torch.use_deterministic_algorithms(settings.determinism)
        torch.backends.cudnn.deterministic = settings.determinism
        torch.backends.cudnn.benchmark = False  # no per-process autotuning unless asked
        torch.backends.cuda.matmul.allow_tf32 = settings.tf32
        torch.backends.cudnn.allow_tf32 = settings.tf32
        if settings.onednn is not None:  # else PyTorch's own default (on)
            torch.backends.mkldnn.enabled = settings.onednn  # type: ignore[assignment]

    def _check_device(self, name: str) -> None:
        if name.startswith("gpu"):
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if int(name.split(":")[1]) >= count:
                raise RunError(f"{name} requested but PyTorch sees {count} CUDA device(s)")

    def device_scope(self, device: str) -> Any:
        self._check_device(device)
        return keras.device(device)

    def probe_scope(self, config: RunConfig) -> Any:
        return _inference_on(self.device_scope(config.device))

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return _numpy(tensor)

    def devices(self) -> list[dict[str, Any]]:
        devices: list[dict[str, Any]] = [
            {"name": "cpu", "type": "CPU", "description": cpu_model(), "compute_capability": []}
        ]
        for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
            properties = torch.cuda.get_device_properties(index)
            uuid = str(getattr(properties, "uuid", ""))
            devices.append(
                {
                    "name": f"gpu:{index}",
                    "type": "GPU",
                    "description": properties.name,
                    "compute_capability": [properties.major, properties.minor],
                    "identity": identity_for(properties.name, index, uuid=uuid)
                    or {"uuid": uuid, "memory_mib": properties.total_memory >> 20},
                }
            )
        return devices

    def facts(self) -> dict[str, Any]:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return {
            "runtime_version": str(torch.__version__),
            "torch_version": str(torch.__version__),
            "cuda_build": torch.version.cuda is not None,
            "cuda_version": str(torch.version.cuda or ""),
            "cudnn_version": str(cudnn or ""),
            "cuda_loaded": loaded_cuda_libraries(),
            "onednn_enabled": bool(torch.backends.mkldnn.enabled),
            "op_determinism": bool(torch.are_deterministic_algorithms_enabled()),
            "intra_op_threads": int(torch.get_num_threads()),
        }

    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        keras_model = model.model_for(config.precision, config.keep_float32)
        names = model.output_names
        device = config.device

        def run(batch: np.ndarray) -> Outputs:
            with torch.inference_mode(), keras.device(device):
                outputs = model.output_list(keras_model(batch, training=False), names)
            return Outputs(
                [_numpy(output) for output in outputs],
                tuple(_short(output.device) for output in outputs),
                tuple(str(output.dtype).removeprefix("torch.") for output in outputs),
            )

        return run

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        weights = model.model_for(config.precision, config.keep_float32).weights
        return {_short(weight.value.device) for weight in weights}

    def tf32_operand(self, value: Any) -> Any:
        from keras.src.backend.torch.core import convert_to_tensor

        tensor = convert_to_tensor(value)
        return tf32_rounded(tensor) if tensor.dtype == torch.float32 else value

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        return {
            "tf32_enabled": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "placement": f"eager on {config.device}",
            "keras_backend": keras.backend.backend(),
        }


def tf32_rounded(values: torch.Tensor) -> torch.Tensor:
    """``values`` (float32) rounded to TF32 as ``core/tf32.to_tf32`` does, in PyTorch's
    integer ops on the bits (a view of the same storage as int32)."""
    bits = values.detach().view(torch.int32)  # the bits only: no gradient goes through
    finite = (bits & tf32.EXPONENT_BITS) != tf32.EXPONENT_BITS
    # Ties away from zero; a finite value never overflows an int32.
    added = torch.where(finite, bits + tf32.HALF_ULP, bits)
    kept = added & tf32.signed(tf32.KEPT_BITS)
    quiet = kept | tf32.QUIET_NAN_BIT
    return torch.where(torch.isnan(values), quiet, kept).view(torch.float32)


BACKEND = TorchBackend
