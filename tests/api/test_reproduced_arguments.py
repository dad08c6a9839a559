"""``Reproduced.run_arguments`` is the request the matching run was made by, so
``segdiff_gui.run(model, **run_arguments, cache=cache)`` is a cache hit whatever the model
settings were (the command line's "the same run again": tests/cli/test_suggested_run.py)."""

import numpy as np
from PIL import Image

import segdiff_gui
from segdiff_gui.storage import ResultCache


def test_the_arguments_of_a_match_carry_every_model_setting(models, tmp_path, fake_engine):
    rng = np.random.default_rng(4)
    image = tmp_path / "rgba.png"
    Image.fromarray(rng.integers(0, 256, (24, 24, 4), dtype=np.uint8), "RGBA").save(image)
    cache = ResultCache(tmp_path / "cache")
    settings = {"preprocess": {"color": "rgb", "std": [0.5]}, "activation": "sigmoid"}
    model = models / "tiny.keras"
    first = segdiff_gui.run(model, image, "batch=1", repeats=1, cache=cache, progress=False,
                            **settings)  # fmt: skip
    (run,) = first.runs
    found = segdiff_gui.reproduce(first.map(run.label), model, image, cache=cache,
                                  progress=False, **settings)  # fmt: skip
    assert found.match == "cpu b1"
    keys = set(cache.keys())
    again = segdiff_gui.run(model, **found.run_arguments, cache=cache, progress=False)
    assert [r.key for r in again.runs] == [run.key]
    assert set(cache.keys()) == keys  # nothing computed
