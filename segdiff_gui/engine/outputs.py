"""From a model's raw outputs to a probability map: choose the output, optionally apply
sigmoid/softmax, and refuse outputs that are not probabilities. Pure numpy on purpose: the
activation applied by segdiff must be identical everywhere, so only the model's own arithmetic
differs between configurations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.config import OutputSelection
from segdiff_gui.core.errors import InputError

__all__ = ["choose_output", "to_probabilities"]

# float16/bfloat16 softmax sums stray further from 1 than float32 ones.
_SUM_TOLERANCE_FLOAT32 = 1e-3
_SUM_TOLERANCE_LOW_PRECISION = 2e-2
_FLOAT32 = np.dtype("<f4")


def choose_output(path: Path, names: list[str], selection: OutputSelection) -> int:
    """Index of the output to use; several outputs need ``--output NAME|INDEX``."""
    return selection.index_in(names, path)


def _sigmoid(values: np.ndarray) -> np.ndarray:
    # stable for large |x|; in the map's own dtype (float32, or float64 for the exact run)
    result: np.ndarray = (0.5 * (np.tanh(0.5 * values) + 1.0)).astype(values.dtype)
    return result


def _softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max(axis=-1, keepdims=True))
    result: np.ndarray = (shifted / shifted.sum(axis=-1, keepdims=True)).astype(values.dtype)
    return result


def _already_probabilities(values: np.ndarray, raw_dtype: np.dtype, quantized: bool) -> bool:
    if not np.isfinite(values).all() or values.min() < 0.0 or values.max() > 1.0:
        return False
    if values.shape[-1] == 1:
        return True
    worst = float(np.abs(values.sum(axis=-1, dtype=np.float64) - 1.0).max())
    return worst <= _sum_tolerance(raw_dtype, quantized)


def _sum_tolerance(raw_dtype: np.dtype, quantized: bool) -> float:
    """How far a softmax's channels may sum from 1: float32's rounding (float64's is far
    within it), or a low precision's: bfloat16 or float16 outputs, or int8 ones dequantized to
    float32 (LiteRT's int8 softmax has steps of 1/256)."""
    low_precision = raw_dtype.itemsize < 4 or quantized
    return _SUM_TOLERANCE_LOW_PRECISION if low_precision else _SUM_TOLERANCE_FLOAT32


def to_probabilities(
    path: Path,
    name: str,
    raw: np.ndarray,
    selection: OutputSelection,
    quantized: bool = False,
    dtype: np.dtype[np.floating[Any]] = _FLOAT32,
) -> tuple[np.ndarray, str]:
    """Turn one image's raw output (H×W×C) into a map of ``dtype`` and its kind
    (``quantized``: the runtime computed it in int8, whatever dtype it is handed over in).
    ``dtype`` is the run's :attr:`~segdiff_gui.core.config.RunConfig.map_dtype`: float32, or
    float64 for the exact reference, whose output is never rounded to float32.

    Returns ``(H×W, "sigmoid")`` for one channel and ``(H×W×C, "softmax")`` for several.
    """
    if raw.ndim != 3:
        raise InputError(
            path,
            f"output {name!r} has per-image shape {raw.shape}; segdiff needs a per-pixel map H×W×C",
        )
    values = raw.astype(dtype)
    channels = values.shape[-1]
    if selection.activation == "softmax" and channels == 1:
        # A softmax over one channel is 1 at every pixel: a map of nothing, stored as if real.
        raise InputError(
            path,
            f"output {name!r} has one channel, over which a softmax is 1 everywhere; a "
            "one-channel map's logits take a sigmoid (activation)",
            fix="activation=sigmoid",
        )
    if selection.activation != "none" and _already_probabilities(values, raw.dtype, quantized):
        # A second sigmoid squeezes every value into [0.5, 0.73]: all would "flip" at 0.5.
        raise InputError(
            path,
            f"output {name!r} already holds probabilities; apply no {selection.activation} to "
            "them (activation)",
            fix="activation=none",
        )
    if selection.activation == "sigmoid":
        values = _sigmoid(values)
    elif selection.activation == "softmax":
        values = _softmax(values)
    if not np.isfinite(values).all():
        raise InputError(path, f"output {name!r} contains NaN or infinite values")
    low, high = float(values.min()), float(values.max())
    activation = "sigmoid" if channels == 1 else "softmax"
    hint = f"apply a {activation} to them (activation)"
    if low < 0.0 or high > 1.0:
        raise InputError(
            path,
            f"output {name!r} is not a probability map: values span "
            f"[{low:.4g}, {high:.4g}]; if these are logits, {hint}",
            fix=f"activation={activation}",
        )
    if channels > 1:
        tolerance = _sum_tolerance(raw.dtype, quantized)
        worst = float(np.abs(values.sum(axis=-1, dtype=np.float64) - 1.0).max())
        if worst > tolerance:
            raise InputError(
                path,
                f"output {name!r} has {channels} channels that do not sum to "
                f"1 (off by up to {worst:.3g}); if these are logits, {hint}",
                fix=f"activation={activation}",
            )
        return values, "softmax"
    return values[..., 0], "sigmoid"
