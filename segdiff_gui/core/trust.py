"""What runs only when the user trusts it, said the same way wherever it is refused: the
parent refuses before it reads a byte of the model, the child again before it loads one."""

from __future__ import annotations

from pathlib import Path

from segdiff_gui.core.errors import InputError

__all__ = ["untrusted_keras_code", "untrusted_saved_model"]


def untrusted_saved_model(path: str | Path) -> InputError:
    """A SavedModel folder without trust: Keras's safe mode refuses it, as segdiff does."""
    return InputError(
        path,
        "is a TensorFlow SavedModel, whose graph can run file and system operations; "
        "Keras safe mode refuses it, so trust the model (safe mode off) only if you "
        "trust its source",
        fix="trust_model=on",
    )


def untrusted_keras_code(path: str | Path) -> InputError:
    """A Keras file whose Python code (a Lambda layer) Keras's safe mode refuses to load."""
    return InputError(
        path,
        "contains Python code (e.g. a Lambda layer) that Keras safe mode refuses to "
        "load; trust the model (safe mode off) only if you trust where the file came "
        "from",
        fix="trust_model=on",
    )
