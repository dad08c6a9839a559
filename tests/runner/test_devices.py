"""The remembered device probe: what it depends on, so that it is never stale in a way that
hides a GPU (issue 14, defect 8: installing the gpu extra left "no GPU" for a day)."""

import json
import sys

import pytest

from segdiff_gui.core.protocol import ModelAnswer
from segdiff_gui.runner import devices


def test_installing_cuda_wheels_makes_the_remembered_probe_stale(tmp_path, monkeypatch):
    asked = []

    def fresh_probe(timeout_s, runtime):
        asked.append(runtime)
        return {"devices": [{"name": "cpu", "type": "CPU"}], "facts": {}}

    monkeypatch.setattr(devices, "_run_probe", fresh_probe)
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    state = tmp_path / "state"
    devices.probe_devices(state)
    devices.probe_devices(state)
    assert len(asked) == 1  # remembered: no second child
    before = devices._fingerprint()
    (site / "nvidia_cudnn_cu12-9.3.0.75.dist-info").mkdir()  # pip install 'segdiff[gpu]'
    assert devices._fingerprint() != before
    assert devices.remembered_probe(state) is None
    devices.probe_devices(state)
    assert len(asked) == 2  # asked again, now that CUDA libraries are there
    devices.probe_devices(state, runtime="jax")
    devices.probe_devices(state, runtime="jax")
    assert asked == ["tensorflow", "tensorflow", "jax"]  # remembered per runtime


def test_the_driver_version_is_part_of_the_fingerprint(monkeypatch):
    monkeypatch.setattr(devices, "_driver_version", lambda: "550.54.14")
    old = devices._fingerprint()
    monkeypatch.setattr(devices, "_driver_version", lambda: "565.57.01")
    assert devices._fingerprint() != old


_ANSWER = ModelAnswer(
    format="keras",
    input_shape=[64, 64, 1],  # height, width, channels, as a child says it
    outputs=[{"name": "mask", "shape": [None, 64, 64, 1]}],
    kinds=["sigmoid"],
    dtype_policies=["float32"],
)


@pytest.mark.parametrize(
    "crafted",
    [
        {"input_shape": 5},
        {"input_shape": "abc"},
        {"input_shape": [None, "64", 64, 1]},
        {"input_shape": [None, -64, 64, 1]},
        {"input_shape": [None, True, 64, 1]},
        {"input_shape": [None] * 1000},
        {"outputs": [{"name": 3, "shape": [None]}]},
        {"outputs": [{"name": "mask", "shape": "x"}]},
        {"kinds": [None]},
        {"kinds": []},  # the window pairs each output with its kind
        {"format": ["keras"]},
        '{"event": ["model"]}',  # a whole file: an event that is no name
        "[" * 100_000,  # nested too deep to parse
        "[]",
    ],
)
def test_a_remembered_model_answer_is_used_only_as_a_child_would_give_it(tmp_path, crafted):
    """A remembered inspection is a file in the cache's folder: planning reads its input
    shape for a tensor's check (``.npy`` images), so one of the wrong types was an internal
    error there ("TypeError: object of type 'int' has no len()"). Malformed, it is not
    remembered: a child is asked again."""
    model = tmp_path / "m.keras"
    model.write_bytes(b"weights")
    state = tmp_path / "state"
    devices.remember_inspection(state, model, "ab" * 32, False, _ANSWER)
    assert devices.remembered_inspection(state, model, "ab" * 32, False) == _ANSWER
    (remembered,) = (state / "models").glob("*.json")
    text = crafted if isinstance(crafted, str) else json.dumps({**_ANSWER.to_dict(), **crafted})
    remembered.write_text(text)
    assert devices.remembered_inspection(state, model, "ab" * 32, False) is None
