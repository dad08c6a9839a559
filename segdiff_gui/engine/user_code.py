"""The user's own preprocessing function (``--preprocess FILE.py:function``), run here in the
engine child and only when trusted: the file and the modules of its folder it imports are
checked against the SHA-256 they were planned (and keyed) with (``core/user_code_files.py``),
the file is executed as a module of its own with its folder first on the import path (as
Python runs a script), and its function turns each decoded image into the model's input. A
module of that folder that the code loaded but the key does not hold (imported by a computed
name) is refused. What it returns is checked like any input: numbers, finite, the model's
height, width and channels; it is cast to float32 as Keras casts a model's input."""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from segdiff_gui.core.config import Preprocessing
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import shape_text
from segdiff_gui.core.user_code_files import code_digest, code_files

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
        if code_digest(path) != preprocessing.function_sha256:
            raise InputError(path, "changed since the runs were planned; run again")
        self.path = path
        self._folder = path.resolve().parent
        self._keyed = {file.resolve() for file in code_files(path)}
        self._checked: set[str] = set(sys.modules)  # segdiff's own, loaded before
        name = str(preprocessing.function).rpartition(":")[2]
        module = types.ModuleType(f"segdiff_user_preprocessing_{path.stem}")
        module.__file__ = str(path)
        try:
            with self._on_path():
                exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - trusted
        except InputError:
            raise
        except Exception as error:  # noqa: BLE001 - the user's code fails in its own way
            raise InputError(path, f"failed to load: {type(error).__name__}: {error}") from None
        function = getattr(module, name, None)
        if not callable(function):
            raise InputError(path, f"defines no function {name!r}")
        self.name = name
        self._function: Callable[[np.ndarray], object] = function

    @contextlib.contextmanager
    def _on_path(self) -> Iterator[None]:
        """The file's folder first on the import path while its code runs (as for a
        script), then every module it loaded from there checked against the key."""
        folder = str(self._folder)
        sys.path.insert(0, folder)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
        self._check_loaded()

    def _check_loaded(self) -> None:
        """Every module loaded from the file's folder since the last look is one the key
        holds: one imported by a computed name (``importlib``) is code the key missed."""
        for name in set(sys.modules) - self._checked:
            self._checked.add(name)
            file = getattr(sys.modules.get(name), "__file__", None)
            if not isinstance(file, str):
                continue
            try:
                loaded = Path(file).resolve()
                within = loaded.relative_to(self._folder)
            except (OSError, ValueError):  # not of the folder
                continue
            of_folder = within.parts[0].partition(".")[0] == name.partition(".")[0]
            if of_folder and loaded not in self._keyed:
                raise InputError(
                    self.path,
                    f"loaded {within} from its folder by a name no import statement of it "
                    "gives, so its runs' key would not hold that code; import it with a plain "
                    "import statement",
                )

    def __call__(
        self, image: np.ndarray, height: int | None, width: int | None, channels: int | None,
        where: str,
    ) -> np.ndarray:  # fmt: skip
        try:
            with self._on_path():
                made = self._function(image.copy())
        except InputError:
            raise
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
