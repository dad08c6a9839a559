"""The demo model converted as its users convert it, into a folder: with
TensorFlow's own ``TFLiteConverter`` in float32 and with dynamic-range int8 (batch free), and
in full int8 calibrated on the demo's own images with a batch fixed at one (as most ``.tflite``
files are); to ONNX with Keras's export; to an OpenVINO IR with ``openvino.convert_model`` and
``save_model``. Run in a process of its own (it imports TensorFlow):
``python -m tests.engine.artefact_files OUT``."""

import sys
from pathlib import Path

import numpy as np
from PIL import Image

ARTEFACTS = ("float32.tflite", "dynamic.tflite", "int8.tflite", "model.onnx", "model.xml")


def convert(out: Path) -> None:
    import keras
    import openvino as ov
    import tensorflow as tf

    from segdiff_gui.resources import demo_images, demo_model

    model = keras.models.load_model(demo_model())
    images = demo_images()
    free = out / "saved-free"
    model.export(str(free), format="tf_saved_model", verbose=False)

    def litert(saved: Path, **options: object) -> bytes:
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved))
        for name, value in options.items():
            setattr(converter, name, value)
        return bytes(converter.convert())

    (out / "float32.tflite").write_bytes(litert(free))
    (out / "dynamic.tflite").write_bytes(litert(free, optimizations=[tf.lite.Optimize.DEFAULT]))
    one = out / "saved-one"
    archive = keras.export.ExportArchive()
    archive.track(model)
    signature = [tf.TensorSpec((1, 256, 256, 1), tf.float32)]
    archive.add_endpoint("serving_default", model.__call__, input_signature=signature)
    archive.write_out(str(one), verbose=False)

    def representative() -> object:
        for path in images:
            pixels = np.asarray(Image.open(path)).astype(np.float32) / 255
            yield [pixels[None, ..., None]]

    int8 = litert(
        one, optimizations=[tf.lite.Optimize.DEFAULT], representative_dataset=representative
    )
    (out / "int8.tflite").write_bytes(int8)
    model.export(str(out / "model.onnx"), format="onnx", verbose=False)
    ov.save_model(ov.convert_model(str(out / "model.onnx")), str(out / "model.xml"))


if __name__ == "__main__":
    convert(Path(sys.argv[1]))
