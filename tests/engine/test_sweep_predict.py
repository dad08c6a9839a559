"""A sweep computes the test set as the user's own ``model.predict(x, batch_size=8)`` does:
a real TensorFlow child, eleven of the demo's images (batches of 8 and 3), each batch through
the forward pass once, and every image's map equal, bit for bit, to the row of it a plain
Keras script in a fresh process predicts."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.protocol import BatchProgress, RunFinished, RunStarted
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.outcome import follow
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache

pytestmark = pytest.mark.slow

IMAGES, BATCH = 11, 8

PREDICT = """
import sys
import numpy as np
from PIL import Image
import keras  # TensorFlow's defaults: nothing set, as a user's script has it

model_path, out, batch, *images = sys.argv[1:]
model = keras.saving.load_model(model_path)
x = np.stack([np.asarray(Image.open(p)).astype(np.float32)[..., None] / 255.0 for p in images])
np.save(out, model.predict(x, batch_size=int(batch), verbose=0)[..., 0])
"""


def test_a_sweep_at_batch_8_is_the_users_predict_bit_for_bit_each_batch_once(tmp_path):
    images = demo_images()[:IMAGES]
    predicted = tmp_path / "predicted.npy"
    # TF_ENABLE_ONEDNN_OPTS stays as the shell has it: segdiff's child sees it too.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TF_") or k == "TF_ENABLE_ONEDNN_OPTS"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", PREDICT, demo_model(), predicted, str(BATCH), *images],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    users = np.load(predicted)
    assert users.shape == (IMAGES, 256, 256)

    cache = ResultCache(tmp_path / "cache")
    request = MatrixRequest(
        demo_model(), tuple(images), cache, (RunConfig(batch=BATCH),), repeats=1, sweep=True
    )
    seen: list[object] = []
    follow(request.start(), seen.append)
    finished = [message for message in seen if isinstance(message, RunFinished)]
    assert len(finished) == IMAGES
    passes = Counter(
        message.key
        for message in seen
        if isinstance(message, BatchProgress) and message.what == "inference"
    )
    assert sum(passes.values()) == math.ceil(IMAGES / BATCH)  # 8 + 3: two forward passes
    # The steps around a forward pass are said for the configuration's first run only.
    first = next(message.key for message in seen if isinstance(message, RunStarted))
    around = {
        message.key
        for message in seen
        if isinstance(message, BatchProgress) and message.what != "inference"
    }
    assert around == {first}
    for message in finished:
        record = cache.read_run(message.key)
        index = [image.name for image in images].index(record.target_name)
        assert record.provenance.to_dict()["input_batch_shape"][0] == (
            BATCH if index < BATCH else IMAGES - BATCH
        )
        assert record.probabilities.tobytes() == users[index].astype(np.float32).tobytes(), (
            record.target_name
        )
