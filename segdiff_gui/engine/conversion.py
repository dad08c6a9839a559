"""Converting the Keras model for a deployment runtime, with Keras's own export:
``model.export(format="litert")`` (TensorFlow's LiteRT converter) and ``format="onnx"``
(tf2onnx), under the TensorFlow backend.

The converter's options are written here once; with the converters' versions, the model's hash,
(for LiteRT, of a model of free input size) the input size it is converted for, and (for full
int8) the calibration images they make the conversion's key, so an artefact is made once and
served from the cache afterwards (storage/converted.py). What the converters warn (Python
warnings, their loggers, the C++ converter's log) is kept with the artefact. A conversion that
fails is one line naming the op, the layer it came from and why (converter_errors.py).

LiteRT's converter cannot lower a convolution whose input channels are unknown, which is what
a model of free height and width (``(None, None, 3)``, as most U-Nets are saved) gives it after
an upsampling; so such a model is converted for the size of the images it runs (the batch stays
free): its input signature fixes height, width and channels (``fixed_input_shape``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.runtimes import Conversion, Runtime
from segdiff_gui.engine.converter_errors import (
    conversion_failure,
    installed_version,
    onnx_refusals,
)
from segdiff_gui.engine.native_log import native_stderr
from segdiff_gui.storage.converted import ConvertedModel

if TYPE_CHECKING:  # Keras is imported where a model is converted, not by a runtime's probe
    from segdiff_gui.engine.models import LoadedModel

__all__ = ["conversion_ingredients", "convert", "fixed_input_shape"]

# Only LiteRT's builtin ops: ai-edge-litert has no Flex delegate, so a model needing Select TF
# ops (Keras's export would allow them) converts but cannot run; refusing them names the op.
_LITERT_OPS = "TFLITE_BUILTINS"
_KEPT_WARNINGS = 20
_WARNING_LINE = re.compile(r"warn|deprecat|not supported|fall(s|ing)? back", re.IGNORECASE)


def _converters(conversion: Conversion) -> dict[str, str]:
    names = ("tensorflow", "keras") + (("tf2onnx", "onnx") if conversion.format == "onnx" else ())
    return {name: installed_version(name) for name in names}


def _options(conversion: Conversion) -> dict[str, Any]:
    """The conversion's options as recorded and keyed (what ``_export_arguments`` passes)."""
    if conversion.format == "onnx":
        return {"format": "onnx", "exporter": "keras model.export (tf2onnx)"}
    options: dict[str, Any] = {"format": "litert", "supported_ops": [_LITERT_OPS]}
    if conversion.quantization != "float32":
        options["optimizations"] = ["DEFAULT"]
    if conversion.quantization == "float16":
        options["supported_types"] = ["float16"]
    if conversion.calibrated:
        options["representative_dataset"] = "the run's images (calibration_hashes)"
        options["inference_io"] = "float32 (integer kernels inside, float fall-back)"
    return options


def fixed_input_shape(
    model: LoadedModel, conversion: Conversion, image: tuple[int, ...]
) -> tuple[int, int, int] | None:
    """The height, width and channels a conversion fixes for inputs prepared as ``image``
    (H×W×C): None where the model's input has no free size, or the converter keeps it free
    (ONNX)."""
    if not conversion.fixes_input_size or None not in model.input_shape:
        return None
    height, width, channels = (int(extent) for extent in image)
    return height, width, channels


def conversion_ingredients(
    runtime: Runtime,
    model_hash: str,
    calibration: list[str],
    preprocessing: dict[str, Any],
    input_shape: tuple[int, int, int] | None = None,
) -> dict[str, Any]:
    """What a conversion is made from, and how: its key's ingredients (``input_shape``: the
    size ``fixed_input_shape`` gives, where it fixes one)."""
    assert runtime.conversion is not None
    ingredients: dict[str, Any] = {
        "model": model_hash,
        "runtime": runtime.name,
        "converters": _converters(runtime.conversion),
        "options": _options(runtime.conversion),
    }
    if input_shape is not None:
        ingredients["input_shape"] = list(input_shape)
    if runtime.conversion.calibrated:
        ingredients["calibration"] = list(calibration)
        ingredients["preprocessing"] = preprocessing
    return ingredients


def _input_signature(model: LoadedModel, shape: list[int]) -> list[Any]:
    """Keras's export signature with the model's input of ``shape`` (H, W, C); the batch as
    the model has it (free, unless the model fixes it)."""
    import keras

    assert model.keras_model is not None
    (tensor,) = model.keras_model.inputs
    spec = keras.InputSpec(shape=(tensor.shape[0], *shape), dtype=tensor.dtype, name=tensor.name)
    return [spec]


def _export_arguments(
    model: LoadedModel,
    conversion: Conversion,
    ingredients: dict[str, Any],
    representative: Callable[[], Iterator[list[np.ndarray]]],
) -> dict[str, Any]:
    import tensorflow as tf

    if conversion.format == "onnx":
        return {}
    target_spec: dict[str, Any] = {"supported_ops": [getattr(tf.lite.OpsSet, _LITERT_OPS)]}
    arguments: dict[str, Any] = {"target_spec": target_spec}
    if "input_shape" in ingredients:
        arguments["input_signature"] = _input_signature(model, ingredients["input_shape"])
    if conversion.quantization != "float32":
        arguments["optimizations"] = [tf.lite.Optimize.DEFAULT]
    if conversion.quantization == "float16":
        target_spec["supported_types"] = [tf.float16]
    if conversion.calibrated:
        arguments["representative_dataset"] = representative
    return arguments


class _Recorded(logging.Handler):
    """The converters' log records of WARNING and above (tf2onnx says unsupported ops so)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _listening(handler: logging.Handler) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("tf2onnx", "tensorflow", "absl")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def _kept(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(line[:300] for line in lines if _WARNING_LINE.search(line)))[
        :_KEPT_WARNINGS
    ]


def _call_once(model: LoadedModel) -> None:
    """tf2onnx converts a model that has been called ("The model provided has never called"):
    one batch of zeros of its input shape (a free height or width taken as 32)."""
    shape = [1, *(extent or 32 for extent in model.input_shape)]
    assert model.keras_model is not None
    model.keras_model(np.zeros(shape, dtype=np.float32), training=False)


def convert(
    model: LoadedModel,
    runtime: Runtime,
    ingredients: dict[str, Any],
    representative: Callable[[], Iterator[list[np.ndarray]]],
) -> ConvertedModel:
    """``model`` converted for ``runtime`` (``representative`` yields calibration batches
    for full int8); raises InputError naming the op a converter refuses."""
    conversion = runtime.conversion
    assert conversion is not None and model.keras_model is not None
    suffix = conversion.suffix
    native: list[str] = []
    recorded = _Recorded()
    started = time.perf_counter()
    if conversion.format == "onnx":
        _call_once(model)
    with tempfile.TemporaryDirectory(prefix="segdiff-convert-") as folder:
        target = Path(folder) / f"model{suffix}"
        try:
            with (
                warnings.catch_warnings(record=True) as caught,
                _listening(recorded),
                native_stderr(native, echo=True),
            ):
                warnings.simplefilter("always")
                model.keras_model.export(
                    str(target),
                    format=conversion.format,
                    verbose=False,
                    **_export_arguments(model, conversion, ingredients, representative),
                )
        except InputError:
            raise
        except Exception as error:  # noqa: BLE001 - converters raise many types
            text = f"{error}\n" + "\n".join(native)
            raise conversion_failure(model.path, conversion.format, text) from error
        if refused := onnx_refusals(recorded.messages):
            raise conversion_failure(model.path, conversion.format, refused[0])
        data = target.read_bytes()
    seconds = time.perf_counter() - started
    said = [str(w.message) for w in caught] + recorded.messages + native
    facts = {
        "runtime": runtime.name,
        "title": conversion.title,
        "converters": _converters(conversion),
        "options": _options(conversion),
        "bytes": len(data),
        "seconds": round(seconds, 3),
        "warnings": _kept(said),
    }
    if "input_shape" in ingredients:  # the model's free size, fixed (the batch as it has it)
        batch = model.keras_model.inputs[0].shape[0]
        facts["input_shape"] = [batch or "N", *ingredients["input_shape"]]
    return ConvertedModel(ingredients, data, facts)
