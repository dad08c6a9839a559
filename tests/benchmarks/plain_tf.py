"""The baseline of the engine-overhead benchmark: what a person would write by hand. Load the
model once, and for each configuration build the target's batch from the set, call the model
(XLA through ``tf.function(jit_compile=...)``, bfloat16 through a clone with that policy), and
save the target's map with ``np.save``. Run: ``python plain_tf.py MODEL OUT_DIR IMAGE...``."""

import sys
from pathlib import Path

import numpy as np
from PIL import Image


def main() -> int:
    import keras
    import tensorflow as tf

    model_path, out = sys.argv[1], Path(sys.argv[2])
    images = [np.asarray(Image.open(p), dtype=np.float32) / 255 for p in sys.argv[3:]]
    images = [i[..., None] if i.ndim == 2 else i for i in images]
    model = keras.models.load_model(model_path)

    def with_policy(policy: str) -> keras.Model:
        def clone(layer: keras.layers.Layer) -> keras.layers.Layer:
            return layer.__class__.from_config({**layer.get_config(), "dtype": policy})

        copy = keras.models.clone_model(model, clone_function=clone)
        copy.set_weights(model.get_weights())
        return copy

    configurations = [("b1", 1, False, None), ("b64", 64, False, None),
                      ("xla", 1, True, None), ("bf16", 1, False, "mixed_bfloat16")]  # fmt: skip
    for name, batch, xla, policy in configurations:
        network = with_policy(policy) if policy else model
        forward = tf.function(network, jit_compile=xla)
        others = images[1:] * (batch // max(1, len(images) - 1) + 1)
        batch_array = np.stack([images[0], *others[: batch - 1]])
        result = np.asarray(forward(tf.constant(batch_array)), dtype=np.float32)[0]
        np.save(out / f"{name}.npy", result, allow_pickle=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
