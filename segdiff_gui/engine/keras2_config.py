"""A Keras 2 model's config, read before tf_keras loads the model: tf_keras has no safe mode
for a ``.h5`` (a Lambda layer's bytecode is unmarshalled and run whatever ``safe_mode`` says),
so an untrusted model whose config is code is refused here, by core/trust.py's rule, before
tf_keras reads a layer of it. Reads the file with h5py and zipfile only (no runtime)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import h5py

from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.limits import MAX_MODEL_CONFIG_BYTES
from segdiff_gui.core.trust import untrusted_keras2_code

__all__ = ["check_not_code"]


def _config_text(path: Path) -> str | bytes | None:
    """The model's config as stored: a ``.h5``'s ``model_config`` attribute, a ``.keras``
    archive's ``config.json``; each bounded before it is read. None where there is none
    (tf_keras then says what is missing, reading nothing it could run)."""
    try:
        if path.suffix.lower() == ".keras":
            with zipfile.ZipFile(path) as archive:
                info = archive.getinfo("config.json")
                if info.file_size > MAX_MODEL_CONFIG_BYTES:
                    raise _config_too_large(path, info.file_size)
                return archive.read(info)
        with h5py.File(path, "r") as handle:
            if "model_config" not in handle.attrs:
                return None
            # A fixed-length string's size is its storage's, known before it is read; a
            # variable-length one's only once read (an attribute is never compressed: it
            # takes no more memory than its bytes in the file), and checked before parsing.
            size = handle.attrs.get_id("model_config").get_storage_size()
            if size > MAX_MODEL_CONFIG_BYTES:
                raise _config_too_large(path, size)
            value = handle.attrs["model_config"]
            if isinstance(value, str | bytes) and len(value) > MAX_MODEL_CONFIG_BYTES:
                raise _config_too_large(path, len(value))
    except KeyError:
        return None
    except (OSError, RuntimeError, ValueError, zipfile.BadZipFile) as error:
        raise InputError(path, f"cannot be read as a Keras 2 model: {first_line(error)}") from None
    if not isinstance(value, str | bytes):
        raise InputError(path, "holds a model config that is not JSON text")
    return value


def _config_too_large(path: Path, size: int) -> InputError:
    return InputError(
        path,
        f"holds a model config of {size / 2**20:,.0f} MB, over segdiff's bound of "
        f"{MAX_MODEL_CONFIG_BYTES >> 20} MB for a model's config",
    )


def check_not_code(path: Path) -> None:
    """Refuse an untrusted model file whose config is code (core/trust.py), before tf_keras
    reads a layer of it."""
    text = _config_text(path)
    if text is None:
        return
    try:
        config = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise InputError(path, "holds a model config that is not JSON") from None
    if (refusal := untrusted_keras2_code(path, config)) is not None:
        raise refusal
