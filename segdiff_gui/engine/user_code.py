"""The user's own preprocessing function (``--preprocess FILE.py:function``), run here in the
engine child and only when trusted: the file is checked against the SHA-256 it was planned
(and keyed) with, executed as a module of its own, and its function turns each decoded image
into the model's input. What it returns is checked like any input: numbers, finite, the
model's height, width and channels; it is cast to float32 as Keras casts a model's input."""

from __future__ import annotations

import hashlib
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

from segdiff_gui.core.config import Preprocessing
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import shape_text

__all__ = ["UserPreprocessing"]


class UserPreprocessing:
    """The function of ``preprocessing``, loaded once per child."""

    def __init__(self, preprocessing: Preprocessing, trusted: bool) -> None:
        where = preprocessing.function_file or str(preprocessing.function)
        if not trusted:
            raise InputError(
                where, "is your own code: it runs only when you trust it", fix="trust_preprocess=on"
            )
        path = Path(where)
        try:
            source = path.read_bytes()
        except OSError as error:
            raise InputError(path, f"cannot be read: {error.strerror or error}") from None
        if hashlib.sha256(source).hexdigest() != preprocessing.function_sha256:
            raise InputError(path, "changed since the runs were planned; run again")
        name = str(preprocessing.function).rpartition(":")[2]
        module = types.ModuleType(f"segdiff_user_preprocessing_{path.stem}")
        module.__file__ = str(path)
        try:
            exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - trusted
        except Exception as error:  # noqa: BLE001 - the user's code fails in its own way
            raise InputError(path, f"failed to load: {type(error).__name__}: {error}") from None
        function = getattr(module, name, None)
        if not callable(function):
            raise InputError(path, f"defines no function {name!r}")
        self.path = path
        self.name = name
        self._function: Callable[[np.ndarray], object] = function

    def __call__(
        self, image: np.ndarray, height: int | None, width: int | None, channels: int | None,
        where: str,
    ) -> np.ndarray:  # fmt: skip
        try:
            made = self._function(image.copy())
        except Exception as error:  # noqa: BLE001 - the user's code fails in its own way
            raise InputError(
                where, f"{self.name}() in {self.path.name} raised {type(error).__name__}: {error}"
            ) from None
        values = np.asarray(made)
        if values.dtype.kind not in "uif":
            raise InputError(
                where, f"{self.name}() gave {values.dtype} values; the model's input is numbers"
            )
        values = values.astype(np.float32)
        if values.ndim == 2:
            values = values[..., None]
        wanted = (height or values.shape[0], width or values.shape[1], channels or values.shape[-1])
        if values.ndim != 3 or values.shape != wanted:
            shape = shape_text(values.shape)
            raise InputError(
                where,
                f"{self.name}() gave an input of shape {shape}; the model takes "
                f"{shape_text(wanted)}",
            )
        if not np.isfinite(values).all():
            raise InputError(where, f"{self.name}() gave NaN or infinite values")
        return np.ascontiguousarray(values)
