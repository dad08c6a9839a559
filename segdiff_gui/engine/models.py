"""Loading a model (Keras 3 ``.keras``, legacy ``.h5``, TensorFlow SavedModel directory) and
giving it one calling convention: a float32 N×H×W×C batch in, a list of named outputs out.

Keras safe mode stays on unless the user said ``--trust-model``. A model is Keras 3's, or
Keras 2's where a tf_keras child loaded it (``LoadedModel.api``, engine/backends/tf_keras.py):
its rebuild for a precision takes the same steps in that Keras's own classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras
from keras import tree

from segdiff_gui.core.config import saved_model_refuses_precision
from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.runtimes import EXACT_PRECISION
from segdiff_gui.core.trust import untrusted_keras_code, untrusted_saved_model

__all__ = ["LoadedModel", "computing_layers", "image_input_shape", "layer_paths", "load_model"]

# A batch in, every output out, as the runtime's own tensors.
Forward = Callable[[Any], list[Any]]


@dataclass
class LoadedModel:
    path: Path
    format: str
    input_shape: tuple[int | None, int | None, int | None]
    output_names: list[str]
    keras_model: keras.Model | None = None
    signature: Any = None
    signature_input: str = ""
    # The object a SavedModel signature belongs to: its variables live as long as it does.
    owner: Any = None
    # The Keras that loaded ``keras_model`` and rebuilds it: ``keras`` (3), or ``tf_keras``.
    api: Any = keras
    _rebuilt: dict[tuple[str, tuple[str, ...]], keras.Model] = field(default_factory=dict)

    def forward(self, precision: str, keep_float32: tuple[str, ...] = ()) -> Forward:
        """A callable running the model under ``precision`` (a Keras dtype policy name), with
        the layers ``keep_float32`` names in float32."""
        if self.keras_model is None:
            if precision != "float32":
                raise saved_model_refuses_precision(self.path)
            signature, name, names = self.signature, self.signature_input, self.output_names

            def call_signature(batch: Any) -> list[Any]:
                outputs = signature(**{name: batch})
                return [outputs[n] for n in names]

            return call_signature
        model = self.model_for(precision, keep_float32)

        def call_keras(batch: Any) -> list[Any]:
            return self.output_list(model(batch, training=False), self.output_names)

        return call_keras

    @staticmethod
    def output_list(outputs: Any, names: list[str]) -> list[Any]:
        """A Keras call's outputs (one tensor, a list or a dict by name) as a list."""
        if isinstance(outputs, dict):
            return [outputs[n] for n in names]
        return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    def model_for(self, precision: str, keep_float32: tuple[str, ...] = ()) -> keras.Model:
        """The Keras model rebuilt under ``precision``, the layers ``keep_float32`` names
        (hierarchically: ``encoder/conv``) in float32.

        A loaded model keeps the dtype policy it was saved with (set per layer in its config),
        so a global policy would change nothing: each layer is re-created with the new policy
        and the float32 weights are copied over. The input layer stays float32. This is the
        code ``segdiff repair`` gives the user to apply (see core/repair.py): the same steps.

        The exact reference (``float64``) is rebuilt so too, its input layers (those of nested
        models as well) float64: the float32 input is widened exactly where it enters and no
        layer boundary rounds it back to float32; the weights (batch normalisation's moving
        statistics among them) are widened exactly by the copy.
        """
        assert self.keras_model is not None
        api = self.api
        if not keep_float32 and _policies(self.keras_model, api) == {precision}:
            return self.keras_model
        key = (precision, keep_float32)
        if key not in self._rebuilt:
            path_of = dict(layer_paths(self.keras_model, api=api))
            unknown = set(keep_float32) - set(path_of.values())
            if unknown:
                raise InputError(
                    self.path,
                    f"has no layer {', '.join(sorted(unknown)[:5])} to keep in float32 "
                    "(names as 'segdiff layers' gives them)",
                )
            kept = set(keep_float32)
            exact = precision == EXACT_PRECISION

            def policy_of(layer: keras.layers.Layer) -> str:
                return "float32" if path_of.get(id(layer)) in kept else precision

            rebuilt = _rebuilt(self.keras_model, policy_of, precision if exact else None, api)
            rebuilt.set_weights(self.keras_model.get_weights())
            took = _policies(rebuilt, api)
            wanted = {precision} | ({"float32"} if kept else set())
            if not took <= wanted or (not kept and took != {precision}):
                raise InputError(
                    self.path, f"precision {precision} did not take effect: layers use {took}"
                )
            if exact and (inputs := _input_dtypes(rebuilt)) != {precision}:
                raise InputError(
                    self.path, f"precision {precision} did not take effect: inputs are {inputs}"
                )
            self._rebuilt[key] = rebuilt
        return self._rebuilt[key]


def _rebuilt(
    model: keras.Model,
    policy_of: Callable[[keras.layers.Layer], str],
    input_dtype: str | None,
    api: Any = keras,
) -> keras.Model:
    """``model`` re-created layer by layer, each computing layer with the dtype policy
    ``policy_of`` gives it, nested models walked into (their layers re-created too), every
    model's inputs of ``input_dtype`` (``None``: as they were). Weights are not copied.
    ``api``: the Keras whose classes ``model`` is of (Keras 3, or tf_keras)."""

    def clone_layer(layer: keras.layers.Layer) -> keras.layers.Layer:
        if isinstance(layer, api.Model):
            return _rebuilt(layer, policy_of, input_dtype, api)
        config = layer.get_config()
        config["dtype"] = policy_of(layer)
        return layer.__class__.from_config(config)

    def input_like(tensor: Any) -> Any:
        dtype = input_dtype or tensor.dtype
        return api.Input(batch_shape=tensor.shape, dtype=dtype, name=tensor.name)

    inputs = tree.map_structure(input_like, model.input)
    rebuilt: keras.Model = api.models.clone_model(
        model, input_tensors=inputs, clone_function=clone_layer
    )
    return rebuilt


def _input_dtypes(model: keras.Model) -> set[str]:
    """The dtypes of every input of ``model`` and of the models nested in it."""
    found = {str(tensor.dtype) for tensor in tree.flatten(model.input)}
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.Model):
            found |= _input_dtypes(layer)
    return found


def layer_paths(model: keras.Model, prefix: str = "", api: Any = keras) -> list[tuple[int, str]]:
    """Every layer of ``model`` (nested models walked into) by id, with its hierarchical name
    as the layer probe gives it: ``encoder/conv``. ``api``: the Keras of ``model``."""
    paths = []
    for layer in model.layers:
        paths.append((id(layer), prefix + layer.name))
        if isinstance(layer, api.Model):
            paths += layer_paths(layer, f"{prefix}{layer.name}/", api)
    return paths


def computing_layers(model: keras.Model, api: Any = keras) -> list[keras.layers.Layer]:
    """Every layer that computes, nested models walked into (not inputs, not the models)."""
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if not isinstance(layer, (api.layers.InputLayer, api.Model))
    ]


def _policies(model: keras.Model, api: Any = keras) -> set[str]:
    """Dtype policies of every computing layer, nested models included."""
    return {layer.dtype_policy.name for layer in computing_layers(model, api)}


def image_input_shape(path: Path, shape: Any) -> tuple[int | None, int | None, int | None]:
    dims = tuple(None if d is None else int(d) for d in shape)
    if len(dims) != 4:
        raise InputError(path, f"model input has shape {dims}; segdiff needs images N×H×W×C")
    return dims[1], dims[2], dims[3]


def keras_loaded(load: Callable[[], Any], path: Path, trust: bool, how: str) -> Any:
    """What ``load`` (a Keras or tf_keras ``load_model`` of ``path``) returns; its failure in
    one line naming the file: code that ``safe_mode`` refused, untrusted, as the trust it
    needs; else "cannot be loaded ``how``" and Keras's first line (and, with --debug, the
    traceback the child sends along)."""
    try:
        return load()
    except ValueError as error:
        if not trust and ("safe_mode" in str(error) or "Lambda" in str(error)):
            raise untrusted_keras_code(path) from None
        raise InputError(path, f"cannot be loaded {how}: {first_line(error)}") from error
    except Exception as error:  # noqa: BLE001 - Keras raises many types for a corrupt file
        raise InputError(path, f"cannot be loaded {how}: {first_line(error)}") from error


def _load_keras(path: Path, trust: bool) -> LoadedModel:
    if trust:
        keras.config.enable_unsafe_deserialization()
    model = keras_loaded(
        lambda: keras.models.load_model(path, compile=False, safe_mode=not trust),
        path, trust, "as a Keras model",
    )  # fmt: skip
    if len(model.inputs) != 1:
        raise InputError(path, f"model has {len(model.inputs)} inputs; segdiff feeds one image")
    return LoadedModel(
        path=path,
        format=path.suffix.lstrip(".").lower(),
        input_shape=image_input_shape(path, model.inputs[0].shape),
        output_names=list(model.output_names),
        keras_model=model,
    )


def _load_saved_model(path: Path) -> LoadedModel:
    import tensorflow as tf  # a SavedModel runs only under TensorFlow (checked before)

    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as error:  # noqa: BLE001 - TF raises many types for a broken folder
        raise InputError(path, f"cannot be loaded as a SavedModel: {first_line(error)}") from None
    signature = loaded.signatures.get("serving_default")
    if signature is None:
        raise InputError(path, "SavedModel has no 'serving_default' signature")
    inputs = signature.structured_input_signature[1]
    if len(inputs) != 1:
        raise InputError(path, f"SavedModel signature has {len(inputs)} inputs; segdiff feeds one")
    ((name, spec),) = inputs.items()
    return LoadedModel(
        path=path,
        format="savedmodel",
        input_shape=image_input_shape(path, spec.shape),
        output_names=sorted(signature.structured_outputs),
        signature=signature,
        signature_input=name,
        owner=loaded,
    )


def load_model(path: str | Path, trust: bool = False) -> LoadedModel:
    """Load under Keras's current backend, with weights created in the current device scope."""
    path = Path(path)
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise InputError(path, "folder is not a SavedModel (no saved_model.pb)")
        if (backend := keras.backend.backend()) != "tensorflow":
            raise InputError(
                path,
                f"is a TensorFlow SavedModel: its graph runs only under TensorFlow, not "
                f"{backend} (runtime=tensorflow)",
            )
        if not trust:
            # Keras safe mode refuses SavedModels too: their graphs may read and write files.
            raise untrusted_saved_model(path)
        return _load_saved_model(path)
    if not path.is_file():
        raise InputError(path, "no such model file")
    if path.suffix.lower() not in (".keras", ".h5", ".hdf5"):
        raise InputError(path, "unknown model format; expected .keras, .h5 or a SavedModel folder")
    return _load_keras(path, trust)
