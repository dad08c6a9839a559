"""``reproduce`` searches runtimes: it starts under every runtime the model file runs
under, and a runtime whose child cannot load the model (a Keras 2 ``.h5`` whose layer Keras 3
does not take) is said among the failed while the search goes on under the others. The real
children's search is tests/engine/test_tf_keras.py's."""

import json
import zipfile
from dataclasses import dataclass

import numpy as np
import pytest

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.reproduce import SearchPlan, Start, Trial, search_stages
from segdiff_gui.core.runtime_defaults import DefaultsInEffect
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.io.maps import MapFile
from segdiff_gui.runner import MatrixRequest
from segdiff_gui.runner import reproduce as workflow
from segdiff_gui.storage import ResultCache

_UNLOADABLE = (
    "cannot be loaded as a Keras model: Unrecognized keyword arguments passed to "
    "Conv2DTranspose: {'groups': 1}"
)


def _search(tmp_path, model, base=None):
    request = MatrixRequest(model, (tmp_path / "image.png",), ResultCache(tmp_path / "cache"))
    user_map = MapFile.of_array("map", np.zeros((2, 2)))
    return workflow.ReproduceSearch(user_map, request, "map", base or RunConfig())


def test_the_search_starts_under_every_runtime_the_model_file_runs_under(tmp_path):
    h5 = tmp_path / "unet.h5"
    h5.write_bytes(b"\x89HDF\r\n\x1a\n")
    keras3 = tmp_path / "unet.keras"
    with zipfile.ZipFile(keras3, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
    assert _search(tmp_path, h5).runtimes() == ("tensorflow", "tf_keras")
    assert _search(tmp_path, keras3).runtimes() == ("tensorflow",)  # Keras 2 cannot read it
    given = RunConfig(batch=4)  # the user's configuration, under each runtime
    assert _search(tmp_path, h5, given).runtimes() == ("tensorflow", "tf_keras")
    assert _search(tmp_path, h5, RunConfig(runtime="jax")).runtimes() == ("jax",)  # as said
    emulated = RunConfig(emulate="tf32")  # what Keras 2 refuses leaves it out
    assert _search(tmp_path, h5, emulated).runtimes() == ("tensorflow",)
    # A user's artefact: every installed runtime that runs it as it is, its own first.
    onnx = tmp_path / "unet.onnx"
    installed = tuple(r for r in ("onnxruntime", "openvino") if RUNTIMES[r].installed())
    assert _search(tmp_path, onnx).runtimes() == (installed or ("tensorflow",))


def _plan() -> SearchPlan:
    in_effect = DefaultsInEffect(onednn=True, xla=False)
    starts = [Start(RunConfig(), in_effect), Start(RunConfig(runtime="tf_keras"), in_effect)]
    return search_stages(Preprocessing(), 4, 0, starts, 255.0)


@dataclass
class _Search:
    """What :func:`reproduce` reads of a search when its matrices are stood in for."""

    plan_: SearchPlan
    user_map: np.ndarray

    def plan(self) -> SearchPlan:
        return self.plan_


@pytest.fixture
def matrices(monkeypatch):
    """Each matrix :func:`reproduce` runs, by its candidates' runtimes: TensorFlow's child
    cannot load the model; tf_keras computes the user's map at batch 4 only."""
    ran = []

    def run(search, candidates, drive, found):
        runtimes = sorted({candidate.config.runtime for candidate in candidates})
        ran.append(runtimes)
        if "tensorflow" in runtimes:
            raise InputError("unet.h5", _UNLOADABLE)
        for candidate in candidates:
            theirs = search.user_map + np.float32(candidate.config.batch != 4)
            trial = Trial.of(candidate, "key", candidate.config.label(), search.user_map, theirs)
            found.trials.append(trial)
        return any(trial.equal for trial in found.trials)

    monkeypatch.setattr(workflow, "_run_candidates", run)
    return ran


def test_a_runtime_that_cannot_load_the_model_is_said_and_the_others_searched(matrices):
    said = []
    answer = workflow.reproduce(_Search(_plan(), np.zeros((2, 2), np.float32)), None, said.append)
    # Both runtimes in one matrix; alone each; then tf_keras's knobs only.
    assert matrices[:3] == [["tensorflow", "tf_keras"], ["tensorflow"], ["tf_keras"]]
    assert all(runtimes == ["tf_keras"] for runtimes in matrices[3:])
    assert answer.failed == (f"the defaults under TensorFlow: unet.h5: {_UNLOADABLE}",)
    assert answer.match is not None and answer.match.label == "tf_keras cpu b4"
    assert answer.sentence().startswith("your map is tf_keras cpu b4 bit for bit (the runtime")
    assert said[:2] == [
        "trying the defaults under TensorFlow and tf_keras: 2 configurations",
        "trying one knob at a time under tf_keras: 5 configurations",
    ]


def test_a_model_no_runtime_can_load_is_the_searchs_one_line(matrices, monkeypatch):
    plan = _plan()
    keras3_only = SearchPlan(plan.starts[:1], {"tensorflow": ()}, {"tensorflow": ()})
    with pytest.raises(InputError, match="Conv2DTranspose"):
        workflow.reproduce(_Search(keras3_only, np.zeros((2, 2), np.float32)), None)
    assert matrices == [["tensorflow"]]  # one runtime: its error is the search's at once
    monkeypatch.setattr(workflow, "_run_candidates", _refuse_all)
    with pytest.raises(InputError, match="unet.h5: nothing loads it"):
        workflow.reproduce(_Search(plan, np.zeros((2, 2), np.float32)), None)


def _refuse_all(search, candidates, drive, found):
    raise InputError("unet.h5", "nothing loads it")
