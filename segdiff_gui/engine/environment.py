"""Process-level settings, applied before TensorFlow is imported (it reads them only once)."""

from __future__ import annotations

import os

from segdiff_gui.core.environment import KEYED_VARIABLES

__all__ = ["apply_common_settings", "apply_process_settings", "recorded_environment"]

# Environment variables that change numerics or placement; recorded with every result (the
# keyed ones must be: a stored run's key is recomputed from what it recorded).
_RECORDED = (
    *KEYED_VARIABLES,
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "OMP_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "NVIDIA_TF32_OVERRIDE",
)


def apply_common_settings() -> None:
    """Quiet C++ logs (they go to stderr anyway) and pin Keras to TensorFlow: a user's
    KERAS_BACKEND=jax would silently change the maths."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"


def apply_process_settings(determinism: bool, onednn: bool, threads: int) -> None:
    """Set what TF reads at import: oneDNN, determinism, the intra-op thread count."""
    apply_common_settings()
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if onednn else "0"
    if determinism:
        os.environ["TF_DETERMINISTIC_OPS"] = "1"
    else:
        os.environ.pop("TF_DETERMINISTIC_OPS", None)
    if threads:
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)


def recorded_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in _RECORDED if name in os.environ}
