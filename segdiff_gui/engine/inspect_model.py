"""``python -m segdiff_gui.engine inspect``: what a model takes and gives, as one JSON line,
or why it cannot be loaded (e.g. Keras safe mode refused it)."""

from __future__ import annotations

import json
from typing import Any

from segdiff_gui.core.errors import InputError
from segdiff_gui.engine.protocol import Channel


def describe(path: str, trust: bool) -> dict[str, Any]:
    from segdiff_gui.engine.models import load_model

    model = load_model(path, trust)
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
    return {
        "event": "model",
        "format": model.format,
        "input_shape": list(model.input_shape),
        "outputs": outputs,
        "kinds": ["sigmoid" if c == 1 else "softmax" for c in channels],
        "dtype_policies": policies,
    }


def main(channel: Channel, job: dict[str, Any]) -> int:
    try:
        answer = describe(job["model_path"], bool(job.get("trust_model", False)))
    except InputError as error:
        answer = {"event": "fatal", "path": error.path, "problem": error.problem, "fix": error.fix}
    channel.write_raw(json.dumps(answer))
    return 0
