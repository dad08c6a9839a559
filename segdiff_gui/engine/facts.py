"""What this process's TensorFlow really is and does: versions, build, devices, and the
settings in effect. Recorded with every result and printed by ``segdiff devices``."""

from __future__ import annotations

import contextlib
import platform
import socket
import sys
from typing import Any

import h5py
import keras
import numpy as np
import tensorflow as tf

from segdiff_gui import __version__
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.engine.environment import recorded_environment

__all__ = ["cpu_model", "device_facts", "onednn_enabled", "process_facts"]


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def onednn_enabled() -> bool:
    """Whether oneDNN kernels are on in this process (reflects TF_ENABLE_ONEDNN_OPTS)."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


def op_determinism_enabled() -> bool:
    """TF has no public getter; the private one is what ``enable_op_determinism`` sets."""
    try:
        from tensorflow.python.framework import config as tf_config
    except ImportError:
        return False
    return bool(tf_config.is_op_determinism_enabled())


def device_facts() -> list[dict[str, Any]]:
    devices = []
    for device in tf.config.list_physical_devices():
        details: dict[str, Any] = {}
        if device.device_type == "GPU":
            with contextlib.suppress(Exception):
                details = dict(tf.config.experimental.get_device_details(device))
        index = device.name.rsplit(":", 1)[-1]
        devices.append(
            {
                "name": f"{device.device_type.lower()}:{index}"
                if device.device_type == "GPU"
                else "cpu",
                "tf_name": device.name,
                "type": device.device_type,
                "description": str(
                    details.get("device_name", cpu_model() if device.device_type == "CPU" else "")
                ),
                "compute_capability": list(details.get("compute_capability", ()) or ()),
            }
        )
    return devices


def process_facts() -> dict[str, Any]:
    """Versions, build info and process-level settings, as flat JSON-friendly values."""
    build = tf.sysconfig.get_build_info()
    return {
        "segdiff_version": __version__,
        "tf_version": tf.__version__,
        "keras_version": keras.__version__,
        "numpy_version": np.__version__,
        "h5py_version": h5py.__version__,
        "hdf5_version": h5py.version.hdf5_version,
        "python_version": sys.version.split()[0],
        "platform": platform.platform(),
        "cuda_build": bool(build.get("is_cuda_build", False)),
        "cuda_version": str(build.get("cuda_version", "")),
        "cudnn_version": str(build.get("cudnn_version", "")),
        "cpu_model": cpu_model(),
        "hostname": socket.gethostname(),
        "onednn_enabled": onednn_enabled(),
        "op_determinism": op_determinism_enabled(),
        "intra_op_threads": int(tf.config.threading.get_intra_op_parallelism_threads()),
        "environment": recorded_environment(),
        "timestamp": local_timestamp(),
    }
