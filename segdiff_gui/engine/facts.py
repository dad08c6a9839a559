"""What this process's runtime really is and does: versions, build, devices, and the settings
in effect. Recorded with every result and printed by ``segdiff devices``. The runtime's own
part comes from its backend; what every runtime shares is here."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import socket
import sys
from typing import TYPE_CHECKING, Any

from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.engine.environment import recorded_environment
from segdiff_gui.version import __version__

if TYPE_CHECKING:
    from segdiff_gui.engine.backends.base import Backend

__all__ = ["cpu_model", "process_facts"]


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _keras_version() -> str:
    """The Keras the process runs; where it imported none (a converted runtime's probe has no
    model to convert), the installed one: saying it costs no TensorFlow import."""
    keras = sys.modules.get("keras")
    return str(keras.__version__) if keras is not None else importlib.metadata.version("keras")


def process_facts(backend: Backend) -> dict[str, Any]:
    """Versions, build info and process-level settings, as flat JSON-friendly values. Which
    runtime is not among them: a child may run several (LiteRT's conversions), each run
    records its own, and a probe the runtime it was asked for."""
    import h5py
    import numpy as np

    return {
        "segdiff_version": __version__,
        "keras_version": _keras_version(),
        "numpy_version": np.__version__,
        "h5py_version": h5py.__version__,
        "hdf5_version": h5py.version.hdf5_version,
        "python_version": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "hostname": socket.gethostname(),
        "process_id": os.getpid(),  # tells repeats in one process from fresh ones
        **backend.facts(),
        "environment": recorded_environment(),
        "timestamp": local_timestamp(),
    }
