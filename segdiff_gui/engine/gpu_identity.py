"""Who a GPU is, beyond its index: UUID, name, memory, driver and compute capability (from
``nvidia-smi``, which ships with every NVIDIA driver), and which CUDA libraries this process
actually loaded (not only those its runtime was built for). Runtime-free, so every backend
records the same facts."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["absent_gpu_reasons", "gpu_identities", "identity_for", "loaded_cuda_libraries"]

_QUERY = "index,uuid,name,memory.total,driver_version,compute_cap,pci.bus_id"
# libcudart.so.12.4.127, libcudnn.so.9.1.0, libcublas.so.12 …: the file the loader mapped.
_LIBRARY = re.compile(r"/(lib(cudart|cudnn|cublas|cublasLt|cufft|nccl)\.so[.\d]*)$")


@cache
def gpu_identities() -> tuple[dict[str, Any], ...]:
    """Every NVIDIA GPU ``nvidia-smi`` lists, in its (PCI bus) order; none without a driver."""
    program = shutil.which("nvidia-smi")
    if program is None:
        return ()
    try:
        done = subprocess.run(
            [program, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    gpus = []
    for line in done.stdout.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 7:
            continue
        index, uuid, name, memory, driver, capability, bus = parts
        gpus.append(
            {
                "index": int(index) if index.isdigit() else index,
                "uuid": uuid,
                "name": name,
                "memory_mib": int(memory) if memory.isdigit() else memory,
                "driver": driver,
                "compute_capability": capability,
                "pci_bus_id": bus,
            }
        )
    return tuple(gpus)


def identity_for(
    name: str = "", index: int | None = None, pci_bus_id: str = "", uuid: str = ""
) -> dict[str, Any]:
    """The ``nvidia-smi`` facts of one GPU ({} if none matches): by UUID or PCI bus where the
    runtime says them, else by name where it is unique, else (identical GPUs, all visible,
    in PCI order) by index."""
    gpus = gpu_identities()
    for gpu in gpus:
        if uuid and uuid.lower().removeprefix("gpu-") in gpu["uuid"].lower():
            return gpu
        if pci_bus_id and pci_bus_id.lower()[-7:] == gpu["pci_bus_id"].lower()[-7:]:
            return gpu
    matching = [gpu for gpu in gpus if name and gpu["name"] == name]
    if len(matching) == 1:
        return matching[0]
    same_kind = len(matching) == len(gpus) and os.environ.get("CUDA_VISIBLE_DEVICES") is None
    if same_kind and index is not None and 0 <= index < len(gpus):
        return gpus[index]
    return {}


def loaded_cuda_libraries() -> dict[str, str]:
    """``{"cudnn": "libcudnn.so.9.1.0", …}``: the CUDA libraries mapped into this process."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.rsplit(" ", 1)[-1]
            with contextlib.suppress(OSError):
                path = str(Path(path).resolve()) if "libcu" in path or "nccl" in path else path
            if match := _LIBRARY.search(path):
                found.setdefault(match.group(2), match.group(1))
    return found


def absent_gpu_reasons() -> list[str]:
    """Why a runtime may see no GPU here, as far as the machine itself says."""
    reasons = []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        reasons.append(f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU")
    if not any(Path("/dev").glob("nvidia[0-9]*")):
        reasons.append("no NVIDIA GPU device files (/dev/nvidia0 …): no GPU or no driver")
    elif not Path("/sys/module/nvidia/version").exists() and shutil.which("nvidia-smi") is None:
        reasons.append("no NVIDIA kernel driver loaded")
    return reasons
