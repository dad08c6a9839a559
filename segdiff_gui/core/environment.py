"""Environment variables that change a runtime's numerics (TensorFlow's, JAX's, PyTorch's).

segdiff sets the knob-controlled ones itself from a :class:`RunConfig`, so a value inherited
from the user's shell must not reach a child and silently override a knob. The others are
passed through, and because they change results they are part of the cache key.
``TF_ENABLE_ONEDNN_OPTS`` is the user's where the onednn knob is left at its default (their
script would see it): the child sets it only for onednn=on|off, and the planner keys the
value it gives (core/runtime_defaults.py).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CONTROLLED_VARIABLES", "KEYED_VARIABLES", "child_environment", "keyed_environment"]

CONTROLLED_VARIABLES = (
    "TF_DETERMINISTIC_OPS",  # determinism knob
    "TF_CUDNN_DETERMINISTIC",  # older spelling of the same
    "NVIDIA_TF32_OVERRIDE",  # would override the tf32 knob inside cuDNN/cuBLAS
    "TF_NUM_INTRAOP_THREADS",  # threads knob
    "OMP_NUM_THREADS",  # threads knob (OpenMP builds of oneDNN)
    "KERAS_BACKEND",  # runtime knob
    "TF_USE_LEGACY_KERAS",  # would swap Keras 3 for tf-keras
    "JAX_DEFAULT_MATMUL_PRECISION",  # would override the tf32 knob under JAX
    "JAX_ENABLE_X64",  # would change JAX's dtypes
    "JAX_PLATFORMS",  # device knob: a CPU-only JAX child sets it itself
    "XLA_PYTHON_CLIENT_PREALLOCATE",  # the engine sets it (JAX would take 75 % of a GPU)
    "KERAS_TORCH_DEVICE",  # device knob under PyTorch
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",  # would override the tf32 knob under PyTorch
    "CUBLAS_WORKSPACE_CONFIG",  # determinism knob under PyTorch
)
KEYED_VARIABLES = (
    "TF_XLA_FLAGS",
    "XLA_FLAGS",
    "TF_GPU_ALLOCATOR",
    "CUDA_VISIBLE_DEVICES",
    # cuDNN's algorithm choice: off, or a smaller workspace, picks other kernels.
    "TF_CUDNN_USE_AUTOTUNE",
    "TF_CUDNN_WORKSPACE_LIMIT_IN_MB",
)


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment for an engine child: the user's, less the knob-controlled variables."""
    return {name: value for name, value in environ.items() if name not in CONTROLLED_VARIABLES}


def keyed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The passed-through variables that are set; they go into the cache key."""
    return {name: environ[name] for name in KEYED_VARIABLES if name in environ}
