"""A child for tests/engine/test_runtimes.py (no runtime enters pytest's process): what
OpenVINO's CPU plugin says it infers a float32 model in, asked independently of segdiff.

It compiles a small float32 model (a matrix multiply) for the CPU as Keras's OpenVINO backend
does (``openvino.compile_model(model, "CPU")``, no property), and again with
``INFERENCE_PRECISION_HINT`` f32 and bf16, and prints each compiled model's
``INFERENCE_PRECISION_HINT`` as JSON: ``{"default": "bf16", "f32": "f32", "bf16": "bf16"}``.
"""

from __future__ import annotations

import json

import numpy as np
import openvino
import openvino.opset16 as ops


def main() -> None:
    data = ops.parameter([2, 8], openvino.Type.f32)
    weights = ops.constant(np.arange(64, dtype=np.float32).reshape(8, 8) / 64)
    model = openvino.Model([ops.result(ops.matmul(data, weights, False, False))], [data])
    said = {}
    for name, config in (("default", None), ("f32", "f32"), ("bf16", "bf16")):
        properties = {} if config is None else {"INFERENCE_PRECISION_HINT": config}
        compiled = openvino.compile_model(model, "CPU", properties)
        said[name] = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    print(json.dumps(said))


if __name__ == "__main__":
    main()
