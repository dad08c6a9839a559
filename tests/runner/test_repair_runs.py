"""Precision repair on the demo U-Net in real children: bfloat16's flips at 0.5
brought to 0, every trial a cached run, and the Keras code it prints applied to a fresh model
in a fresh process reproduces the engine's maps bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import parse_config_spec
from segdiff_gui.core.repair import repair_code
from segdiff_gui.runner.repair import RepairSession
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache
from tests.conftest import segdiff
from tests.factories import engine_script

pytestmark = pytest.mark.slow


def _apply(model, image, codes: list[str]) -> list[np.ndarray]:
    """Each printed code run on a fresh model, each in a namespace of its own, in one fresh
    process (one TensorFlow import; its defaults, and the input prepared as the engine's runs
    have them); each one's map of ``image``."""
    seen = engine_script(
        f"""
import json
import numpy as np
import tensorflow as tf
from segdiff_gui.core.config import Preprocessing
from segdiff_gui.core.preprocess import prepare_input
from segdiff_gui.io.images import read_image
one = prepare_input(read_image({str(image)!r}), Preprocessing(), 256, 256, 1, "image")
maps = []
for code in {codes!r}:
    namespace = {{"__name__": "__main__"}}
    exec(code, namespace)
    model = namespace["model"]
    out = tf.function(lambda b: model(b, training=False))(tf.constant(one[None])).numpy()
    maps.append(out[0, ..., 0].astype(np.float32).view(np.uint32).ravel().tolist())
print(json.dumps(maps))
"""
    )
    return [np.asarray(bits, dtype=np.uint32).view(np.float32).reshape(256, 256) for bits in seen]


def test_the_repair_brings_bfloat16_to_no_flips_and_its_code_does_the_same(demo, tmp_path):
    model, images = demo
    cache = ResultCache(tmp_path / "cache")
    request = MatrixRequest(model, tuple(images), cache, repeats=1)
    session = RepairSession(request, parse_config_spec("precision=bf16"), cutoff=0.5, bound=0)
    for _, runner in session.runners():
        for _ in runner.run():
            pass
    result = session.result
    assert result is not None and result.before.flips > 0
    assert result.after is not None and result.after.flips == 0 and result.kept
    assert result.order[0] == "enc1_1"  # the probe blames the first convolution first
    maps = {}
    for trial in result.trials:  # every trial is a cached run: its flips are its map's
        config = parse_config_spec("precision=bf16,keep_float32=" + "+".join(trial.kept))
        (run,) = request.with_configs([config]).plan().runs
        maps[trial.kept] = cache.read_run(run.key).probabilities
    reference = cache.read_run(session.probe_session.sides[0].key).probabilities
    for trial in result.trials:
        assert compare_maps(reference, maps[trial.kept], 0.5).flips == trial.flips
    # The code, applied to a fresh model: the repaired set, and a partial one that flips.
    partial = max((t for t in result.trials if t.flips), key=lambda t: len(t.kept))
    both = (result.kept, partial.kept)
    codes = [repair_code(str(model), "mixed_bfloat16", kept) for kept in both]
    for kept, applied in zip(both, _apply(model, images[0], codes), strict=True):
        assert np.array_equal(applied.view(np.uint32), maps[kept].view(np.uint32))
    assert compare_maps(reference, applied, 0.5).flips == partial.flips > 0

    # Asked again from the command line: every trial served from the cache.
    again = segdiff("repair", model, *images, "--cache", cache.root, "--json")
    assert again.returncode == 0, again.stderr
    shown = json.loads(again.stdout)
    assert shown["keep_float32"] == list(result.kept) and shown["after"]["flips"] == 0
    assert shown["runs_computed"] == 0 and "KEEP_FLOAT32" in shown["code"]  # all cached

    # The report of these runs: the probe and the repair, self-contained; the trials are
    # left out of the study (dozens of search steps), the two plain runs are in it.
    report = tmp_path / "report.html"
    made = segdiff("report", "--cache", cache.root, "--html", report, "--json", tmp_path / "r.json")
    assert made.returncode == 0, made.stderr
    html = report.read_text()
    assert "Where in the network (layer probes)" in html and "first differs: enc1_1" in html
    assert "Precision repair" in html and "KEEP_FLOAT32" in html
    assert "<script" not in html and 'src="http' not in html and 'href="http' not in html
    data = json.loads((tmp_path / "r.json").read_text())
    assert [r["label"] for r in data["comparisons"]] == ["cpu b1 bf16 r0"]
    assert data["repairs"][0]["after"]["flips"] == 0


def test_a_side_whose_run_fails_in_its_probe_child_is_named_not_called_damaged(
    models, small_images, tmp_path
):
    """A probe's child computes its side's missing plain run first; where that run fails (all
    NaN under float16 here), ``repair`` said the missing probe file was "a dangling symbolic
    link; removed, it is probed again". It names the run that failed, as before the change."""
    repaired = segdiff("repair", models / "overflow16.keras", small_images[0], "--config",
                       "precision=fp16", "--cache", tmp_path / "cache")  # fmt: skip
    assert repaired.returncode == 2, repaired.stdout + repaired.stderr
    assert "its run failed, so there is nothing to probe against" in repaired.stderr
    assert "dangling" not in repaired.stderr
