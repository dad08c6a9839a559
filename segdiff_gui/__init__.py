"""segdiff: see which pixels of a segmentation model's probability map change, and why.

The Python API (``segdiff_gui.run``, ``open_cache``, ``open_bundle``, ``Study`` …) lives in
:mod:`segdiff_gui.api` and is re-exported here, loaded on first use: the CLI and the window
import this package first, and their start-up must not pay for the API's imports.
"""

import importlib as _importlib
from typing import Any as _Any

from segdiff_gui.version import __version__

__all__ = ["__version__"]  # and the API's names below, loaded on first use

# segdiff_gui.api's __all__, known here without importing it (a test holds the two equal):
# any other name is an AttributeError at once, never an import of the whole API.
_API_NAMES = frozenset(
    {
        "Comparison",
        "Diagnosis",
        "Explanation",
        "InputError",
        "Preprocessing",
        "Reproduced",
        "Run",
        "RunConfig",
        "Runs",
        "Study",
        "Sweep",
        "demo_images",
        "demo_model",
        "devices",
        "import_maps",
        "open_bundle",
        "open_cache",
        "reproduce",
        "run",
        "sweep",
    }
)


def __getattr__(name: str) -> _Any:
    if name == "api" or name in _API_NAMES:
        api = _importlib.import_module("segdiff_gui.api")
        return api if name == "api" else getattr(api, name)
    raise AttributeError(f"module 'segdiff_gui' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*(name for name in globals() if name.startswith("__")), *_API_NAMES])
