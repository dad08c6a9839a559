"""segdiff: see which pixels of a segmentation model's probability map change, and why.

The Python API (``segdiff_gui.run``, ``open_cache``, ``open_bundle``, ``Study`` …) lives in
:mod:`segdiff_gui.api` and is re-exported here, loaded on first use: the CLI and the window
import this package first, and their start-up must not pay for the API's imports.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"


def _api() -> Any:
    return importlib.import_module("segdiff_gui.api")


def __getattr__(name: str) -> Any:
    # A name of the API's __all__ (its one list): imported now, on first use.
    if not name.startswith("_") and name in _api().__all__:
        return getattr(_api(), name)
    raise AttributeError(f"module 'segdiff_gui' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*(name for name in globals() if name.startswith("__")), *_api().__all__])
