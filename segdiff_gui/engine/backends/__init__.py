"""One module per runtime behind one interface (``base.Backend``); ``load_backend`` imports
only the runtime asked for, so a JAX child never imports TensorFlow."""

from __future__ import annotations

import importlib

from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.engine.backends.base import Backend

__all__ = ["Backend", "load_backend"]


def load_backend(runtime: str) -> Backend:
    """The backend of ``runtime``'s engine module: it serves every runtime of that module a
    child runs (LiteRT's four conversions, each run told its own by its configuration)."""
    module = importlib.import_module(RUNTIMES[runtime].engine)
    backend: Backend = module.BACKEND()  # each backend module names its class BACKEND
    return backend
