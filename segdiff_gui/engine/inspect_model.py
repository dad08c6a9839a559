"""``python -m segdiff_gui.engine inspect``: what a model takes and gives (a ModelAnswer), or
why it cannot be loaded (a ChildFatal: e.g. Keras safe mode refused it)."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import ChildFatal, ModelAnswer
from segdiff_gui.engine.protocol import Channel

if TYPE_CHECKING:
    from segdiff_gui.engine.models import LoadedModel


def describe(path: str, trust: bool) -> ModelAnswer:
    from segdiff_gui.engine.models import load_model

    return describe_loaded(load_model(path, trust))


def describe_loaded(model: LoadedModel) -> ModelAnswer:
    """What a loaded model takes and gives: a run child says it of the model it loaded, so
    that a window on a model never seen needs no inspection child of its own."""
    outputs = []
    if model.keras_model is not None:
        for name, tensor in zip(model.output_names, model.keras_model.outputs, strict=True):
            outputs.append({"name": name, "shape": list(tensor.shape), "dtype": str(tensor.dtype)})
        policies = sorted({layer.dtype_policy.name for layer in model.keras_model.layers})
    else:
        specs = model.signature.structured_outputs
        for name in model.output_names:
            spec = specs[name]
            outputs.append({"name": name, "shape": spec.shape.as_list(), "dtype": spec.dtype.name})
        policies = []
    channels = [output["shape"][-1] for output in outputs]
    return ModelAnswer(
        format=model.format,
        input_shape=list(model.input_shape),
        outputs=outputs,
        kinds=["sigmoid" if c == 1 else "softmax" for c in channels],
        dtype_policies=policies,
    )


def answer_for_model_and_devices(
    model: LoadedModel,
    devices: list[dict[str, Any]],
    facts: dict[str, Any],
    settings: RunConfig,
    channel: Channel,
) -> None:
    """A run child's shortcut: what an inspection child and (for a child of default process
    settings) a device probe would say, so that a model or a machine seen the first time
    costs no TensorFlow child of its own. A model it cannot describe is still run."""
    from segdiff_gui.engine.probe import probe_answer

    try:
        channel.send(describe_loaded(model))
        if settings.process_settings() == RunConfig().process_settings():
            channel.send(probe_answer(devices, {"runtime": settings.runtime, **facts}, []))
    except Exception:  # the inspection child will say it instead
        pass


def main(channel: Channel, job: dict[str, Any]) -> int:
    try:
        channel.send(describe(job["model_path"], bool(job.get("trust_model", False))))
    except InputError as error:
        detail = traceback.format_exc()[-4000:]
        channel.send(ChildFatal(error.path, error.problem, detail, fix=error.fix))
    return 0
