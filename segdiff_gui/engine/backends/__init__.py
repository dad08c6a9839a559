"""One module per runtime behind one interface (``base.Backend``); ``load_backend`` imports
only the runtime asked for, so a JAX child never imports TensorFlow."""

from __future__ import annotations

import importlib

from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.engine.backends.base import Backend

__all__ = ["Backend", "load_backend"]


def load_backend(runtime: str) -> Backend:
    module = importlib.import_module(RUNTIMES[runtime].engine)
    # Each backend module names its class BACKEND; one converted runtime's class serves all
    # its conversions (LiteRT float32 … int8), told which by name.
    backend: Backend = module.BACKEND(runtime) if RUNTIMES[runtime].conversion else module.BACKEND()
    return backend
