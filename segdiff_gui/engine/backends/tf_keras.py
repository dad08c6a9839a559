"""Keras 2 on TensorFlow (``runtime=tf_keras``): the model as a Keras 2 user's script runs it,
with ``TF_USE_LEGACY_KERAS=1`` (core/runtimes.py sets it in this child), loaded by
``tf_keras.models.load_model(path, compile=False)`` and computed as its
``model.predict(x, batch_size=…)`` computes a batch.

``predict`` runs ``predict_step``, ``model(x, training=False)``, in a ``tf.function``, with XLA
only for a model compiled with ``jit_compile=True`` (one loaded without compiling: never,
core/runtime_defaults.py). The TensorFlow backend's forward pass is that very call in a
``tf.function``, XLA as the run says: the same graph, the same kernels, predict's bits
(tests/engine/test_tf_keras.py holds a run to a plain script's ``predict``). Everything that is
TensorFlow's (threads, oneDNN, determinism, TF32, devices, placement and their read-back) is the
TensorFlow backend's; what is Keras 2's is here: loading, the weights' variables, and a
precision policy, a tf_keras mixed-precision policy given to every layer as the model is
rebuilt (engine/models.py, in tf_keras's classes).

Keras 2 and Keras 3 compute some layers in other orders on the same file. Batch normalisation
is one: tf_keras calls TensorFlow's fused kernel (``FusedBatchNormV3``, ``(x − mean) · s + β``
with ``s = γ / √(var + ε)``), Keras 3 ``tf.nn.batch_normalization`` (``x · s + (β − mean ·
s)``): a U-Net with batch normalisation differs between them by a few ULP on many pixels.

tf_keras has no safe mode for a ``.h5`` or a SavedModel (a Lambda's bytecode is run whatever
``safe_mode`` says): an untrusted model's config is read first and refused where it is code
(engine/keras2_config.py); a ``.keras`` that tf_keras wrote is loaded in its safe mode too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tf_keras

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.trust import untrusted_saved_model
from segdiff_gui.engine.backends.tensorflow import TensorFlowBackend
from segdiff_gui.engine.keras2_config import check_not_code
from segdiff_gui.engine.models import LoadedModel, image_input_shape, keras_loaded

__all__ = ["TfKerasBackend", "load_tf_keras"]

_SUFFIXES = (".keras", ".h5", ".hdf5")


class TfKerasBackend(TensorFlowBackend):
    name = "tf_keras"
    # Inspections and device probes are Keras 3's (TensorFlow's backend answers them).
    answers_for_inspection = False
    probe_refusal = (
        "is loaded by tf_keras (Keras 2) here, whose layers segdiff's layer probe does not "
        "walk; probe it under Keras 3 (runtime=tensorflow)"
    )

    def load_model(self, path: str, trust: bool) -> LoadedModel:
        return load_tf_keras(Path(path), trust)

    def facts(self) -> dict[str, Any]:
        # The runtime's own version is tf_keras's; TensorFlow's stays ``tf_version``.
        return {
            **super().facts(),
            "runtime_version": tf_keras.__version__,
            "keras_version": tf_keras.__version__,
        }

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        keras_model = model.model_for(config.precision, config.keep_float32)
        return {self._physical(weight.device) for weight in keras_model.weights}

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        return {
            **super().settings_in_effect(config),
            "keras_backend": tf_keras.backend.backend(),
            "keras_call": "model(x, training=False) in a tf.function, as model.predict's step",
        }


def load_tf_keras(path: Path, trust: bool) -> LoadedModel:
    """``path`` as a Keras 2 user loads it, weights created in the current device scope."""
    if path.is_dir():
        if not trust:  # the planner said it before; a SavedModel's graph is code
            raise untrusted_saved_model(path)
        model_format = "savedmodel"
    elif path.suffix.lower() in _SUFFIXES:
        if not trust:
            check_not_code(path)
        model_format = path.suffix.lstrip(".").lower()
    else:
        raise InputError(path, "unknown model format; expected .h5, .keras or a SavedModel folder")
    model = keras_loaded(
        lambda: tf_keras.models.load_model(str(path), compile=False, safe_mode=not trust),
        path, trust, "by tf_keras",
    )  # fmt: skip
    if not isinstance(model, tf_keras.Model):
        raise InputError(
            path, f"is not a Keras 2 model to tf_keras (it loads as {type(model).__name__})"
        )
    if len(model.inputs) != 1:
        raise InputError(path, f"model has {len(model.inputs)} inputs; segdiff feeds one image")
    return LoadedModel(
        path=path,
        format=model_format,
        input_shape=image_input_shape(path, model.inputs[0].shape),
        output_names=list(model.output_names),
        keras_model=model,
        api=tf_keras,
    )


BACKEND = TfKerasBackend
