"""Process-level settings, applied before the runtime is imported (TensorFlow, JAX and the
CUDA libraries read them only once): which Keras backend, oneDNN, determinism, threads, and
which GPUs the child may touch at all."""

from __future__ import annotations

import contextlib
import importlib.util
import mmap
import os
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.environment import KEYED_VARIABLES
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.runtimes import RUNTIMES

__all__ = [
    "apply_common_settings",
    "apply_process_settings",
    "inherited_keyed",
    "recorded_environment",
    "unused_imports_skipped",
]

# Environment variables that change numerics or placement; recorded with every result (the
# keyed ones must be: a stored run's key is recomputed from what it recorded).
_RECORDED = (
    *KEYED_VARIABLES,
    "KERAS_BACKEND",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "OMP_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "NVIDIA_TF32_OVERRIDE",
    "JAX_PLATFORMS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "CUBLAS_WORKSPACE_CONFIG",
    "TF_USE_LEGACY_KERAS",
)
# What the parent keyed the runs with, before this process adds its own settings (a JAX
# child appends its flags to XLA_FLAGS): recorded as inherited, so keys recompute.
_INHERITED = {name: os.environ[name] for name in KEYED_VARIABLES if name in os.environ}


def inherited_keyed() -> dict[str, str]:
    return dict(_INHERITED)


@contextlib.contextmanager
def unused_imports_skipped(runtime: str) -> Iterator[None]:
    """While the runtime is imported, mark as absent the packages its import pulls in that no
    child of segdiff uses: TensorFlow imports JAX (for TFLite's JAX converter,
    ``tensorflow/lite/python/util.py``), Keras imports pandas (to slice DataFrames in ``fit``)
    and IPython (to tell a notebook), each in a ``try`` that already handles a machine without
    them. They cost about a second of every TensorFlow child's start-up on the 2-core
    reference machine (a fresh demo's first map waits for it). A name set to ``None`` in
    ``sys.modules`` makes ``import`` raise ImportError, as where the package is not installed;
    nothing of the maths changes. Afterwards they import as usual: a trusted preprocessing
    file of the user's may import pandas."""
    unused = ["pandas", "IPython"]
    if RUNTIMES[runtime].keras_backend != "jax":
        unused.append("jax")
    skipped = [name for name in unused if name not in sys.modules]  # one imported stays
    for name in skipped:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in skipped:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def apply_common_settings(runtime: str = "tensorflow") -> None:
    """Quiet C++ logs (they go to stderr anyway) and pin Keras to the run's runtime (a user's
    KERAS_BACKEND would silently change the maths)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = RUNTIMES[runtime].keras_backend
    if runtime == "jax":
        # JAX takes 75 % of every GPU's memory at start-up unless told not to:
        # a probe or a child beside a running one must not.
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"


@cache
def xla_knows(flag: str) -> bool:
    """Whether this jaxlib's XLA defines ``flag`` (``--name=value``): an unknown flag in
    XLA_FLAGS aborts the whole process, so a flag is set only once its name is found among
    the strings of jaxlib's own libraries (no interpreter started: the frozen app has no
    ``python -c``)."""
    name = flag.lstrip("-").split("=", 1)[0].encode()
    spec = importlib.util.find_spec("jaxlib")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        for library in Path(folder).rglob("*.so*"):
            with (
                contextlib.suppress(OSError, ValueError),
                open(library, "rb") as handle,
                mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
            ):
                if data.find(name + b"\0") != -1:
                    return True
    return False


def apply_process_settings(settings: RunConfig, uses_gpu: bool) -> None:
    """Set what the runtime reads at import, for a child whose runs share ``settings``'
    process-level knobs (``uses_gpu``: whether any of them runs on a GPU), as its entry in
    core/runtimes.py says. A runtime this child does not know is an error."""
    runtime = RUNTIMES.get(settings.runtime)
    if runtime is None:
        raise InputError("runtime", f"{settings.runtime!r} is not a runtime this engine knows")
    apply_common_settings(settings.runtime)
    os.environ.pop("TF_DETERMINISTIC_OPS", None)
    values = runtime.environment(settings, uses_gpu, _INHERITED)
    # XLA aborts the whole process on a flag its version does not know: a flag the settings
    # add to XLA_FLAGS is used only once this jaxlib is found to know it.
    added = set(values.get("XLA_FLAGS", "").split()) - set(_INHERITED.get("XLA_FLAGS", "").split())
    for flag in sorted(flag for flag in added if flag.startswith("--")):
        if not xla_knows(flag):
            raise InputError(
                settings.label(),
                f"cannot be set under {runtime.title} here: this jaxlib does not know {flag}",
            )
    os.environ.update(values)


def recorded_environment() -> dict[str, str]:
    """The variables in effect, the keyed ones as the parent passed them."""
    recorded = {name: os.environ[name] for name in _RECORDED if name in os.environ}
    for name in KEYED_VARIABLES:
        recorded.pop(name, None)
    return {**recorded, **_INHERITED}
