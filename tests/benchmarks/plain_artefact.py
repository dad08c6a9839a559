"""A user's artefact run as its runtime documents it, by hand: the floor of the artefact
benchmark and what the artefact tests hold segdiff's maps to, bit for bit. The image is read
as a user would (``x = img.astype(np.float32) / 255``, a channel axis for a grey image), one
batch of one, and the first output saved with ``np.save``.

Run: ``python plain_artefact.py MODEL OUT.npy IMAGE [RUNTIME] [SETTING=VALUE]`` where RUNTIME
is ``litert``, ``onnxruntime`` or ``openvino`` (default: the file's own) and SETTING one of
``xnnpack=off``, ``graph_optimization=disable|basic|extended|all``,
``inference_precision=f32|bf16``, ``threads=N``."""

import sys

import numpy as np
from PIL import Image


def main() -> int:
    model, out, image = sys.argv[1:4]
    runtime = sys.argv[4] if len(sys.argv) > 4 else ""
    name, _, value = (sys.argv[5] if len(sys.argv) > 5 else "=").partition("=")
    x = np.asarray(Image.open(image)).astype(np.float32) / 255
    x = (x[..., None] if x.ndim == 2 else x)[None]
    if model.endswith(".tflite"):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        options = {}
        if name == "xnnpack" and value == "off":
            options["experimental_op_resolver_type"] = (
                OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
            )
        if name == "threads":
            options["num_threads"] = int(value)
        interpreter = Interpreter(model_path=model, **options)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        y = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    elif model.endswith(".onnx") and runtime != "openvino":
        import onnxruntime as ort

        session_options = ort.SessionOptions()
        if name == "graph_optimization":
            level = "ORT_DISABLE_ALL" if value == "disable" else f"ORT_ENABLE_{value.upper()}"
            session_options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        if name == "threads":
            session_options.intra_op_num_threads = int(value)
        session = ort.InferenceSession(model, session_options, providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: x})[0]
    else:
        import openvino as ov

        properties = {}
        if name == "inference_precision":
            properties["INFERENCE_PRECISION_HINT"] = value
        if name == "threads":
            properties["INFERENCE_NUM_THREADS"] = int(value)
        compiled = ov.Core().compile_model(model, "CPU", properties)
        y = compiled(x)[0]
    np.save(out, np.asarray(y, dtype=np.float32), allow_pickle=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
