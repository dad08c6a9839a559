"""What runs only when the user trusts it, said the same way wherever it is refused: the
parent refuses before it reads a byte of the model, the child again before it loads one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from segdiff_gui.core.errors import InputError

__all__ = ["untrusted_keras2_code", "untrusted_keras_code", "untrusted_saved_model"]

# Keras 2 (tf_keras) loads a ``.h5`` with no safe mode: a Lambda layer's Python bytecode is
# unmarshalled and run whatever ``safe_mode`` says, so segdiff reads the model's config first
# (``untrusted_keras2_code``). A TensorFlow function a layer calls by name (TFOpLambda and
# SlicingOpLambda, what Keras 2 makes of ``tf.math.multiply(x, 2)`` or ``x[:, 1:]`` on a Keras
# tensor) is taken untrusted only from TensorFlow's arithmetic: its Python operators, the
# namespaces below, and its top-level ops but those that reach outside the model.
_ARITHMETIC = frozenset(
    {"__operators__", "math", "nn", "image", "linalg", "signal", "bitwise", "dtypes", "sparse"}
)
_NOT_ARITHMETIC = frozenset(
    {"print", "py_function", "numpy_function", "load_op_library", "load_library", "Variable",
     "Module", "function", "Assert", "timestamp"}
)  # fmt: skip
_CALLS_BY_NAME = frozenset({"TFOpLambda", "SlicingOpLambda"})


def untrusted_saved_model(path: str | Path) -> InputError:
    """A SavedModel folder without trust: Keras's safe mode refuses it, as segdiff does."""
    return InputError(
        path,
        "is a TensorFlow SavedModel, whose graph can run file and system operations; "
        "Keras safe mode refuses it, so trust the model (safe mode off) only if you "
        "trust its source",
        fix="trust_model=on",
    )


_KERAS_CODE = (
    "contains Python code (e.g. a Lambda layer) that Keras safe mode refuses to load; trust "
    "the model (safe mode off) only if you trust where the file came from"
)


def untrusted_keras_code(path: str | Path) -> InputError:
    """A Keras file whose Python code (a Lambda layer) Keras's safe mode refuses to load."""
    return InputError(path, _KERAS_CODE, fix="trust_model=on")


def _layer_configs(config: Any) -> Iterator[dict[str, Any]]:
    """Every object of a Keras config that names a class, nested models' layers included."""
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("class_name"), str):
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def untrusted_keras2_code(path: str | Path, config: Any) -> InputError | None:
    """Why a Keras 2 model whose config (its JSON, parsed) is ``config`` is code rather than a
    model, or None: a Lambda layer (Python code), or a layer calling a TensorFlow function
    outside its arithmetic (``io.write_file``)."""
    for layer in _layer_configs(config):
        name = layer["class_name"]
        if name == "Lambda":
            return untrusted_keras_code(path)
        inner = layer.get("config")
        called = inner.get("function") if isinstance(inner, dict) else None
        if name in _CALLS_BY_NAME and not _arithmetic(called):
            shown = called if isinstance(called, str) else type(called).__name__
            return InputError(
                path,
                f"has a layer calling TensorFlow's {shown!r} (a Keras 2 {name}), which is not "
                "arithmetic and can reach outside the model; trust the model only if you "
                "trust where the file came from",
                fix="trust_model=on",
            )
    return None


def _arithmetic(function: Any) -> bool:
    if not isinstance(function, str) or not function:
        return False
    first, _, rest = function.partition(".")
    if rest:
        return first in _ARITHMETIC
    return function.isidentifier() and function not in _NOT_ARITHMETIC
