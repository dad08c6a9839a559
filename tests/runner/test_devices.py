"""The remembered device probe: what it depends on, so that it is never stale in a way that
hides a GPU (installing the gpu extra left "no GPU" for a day)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from segdiff_gui.cli.exit_codes import EXIT_INTERRUPTED
from segdiff_gui.core.protocol import ModelAnswer
from segdiff_gui.core.runtimes import installed_runtimes
from segdiff_gui.runner import devices
from segdiff_gui.storage import ResultCache
from tests.conftest import TESTS, engine_children


def test_installing_cuda_wheels_makes_the_remembered_probe_stale(tmp_path, monkeypatch):
    asked = []

    def fresh_probe(timeout_s, runtime, should_stop=None):
        asked.append(runtime)
        return {"devices": [{"name": "cpu", "type": "CPU"}], "facts": {}}

    monkeypatch.setattr(devices, "_run_probe", fresh_probe)
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    state = tmp_path / "state"
    ResultCache(state).claim()  # answers are remembered in a segdiff cache only
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
    ResultCache(state).claim()
    devices.remember_inspection(state, model, "ab" * 32, False, _ANSWER)
    assert devices.remembered_inspection(state, model, "ab" * 32, False) == _ANSWER
    (remembered,) = (state / "models").glob("*.json")
    if isinstance(crafted, str):
        text = crafted
    else:  # sealed as segdiff seals it: the types are what is wrong
        fields = {**_ANSWER.to_dict(), **crafted}
        fields.pop("event")
        text = json.dumps(devices.sealed_answer(remembered.stem, ModelAnswer(**fields)))
    remembered.write_text(text)
    assert devices.remembered_inspection(state, model, "ab" * 32, False) is None


@pytest.mark.parametrize("change", ["edited", "another model's", "unsealed", "not remembered here"])
def test_a_remembered_model_answer_is_sealed_for_its_own_file(tmp_path, change):
    """What is remembered is a hint. An answer edited in place, one copied
    from another model's file, one without its seal (an older segdiff's), and one a folder
    that is no segdiff cache would have held, are each asked of a child again."""
    model = tmp_path / "m.keras"
    model.write_bytes(b"weights")
    state = tmp_path / "state"
    ResultCache(state).claim()
    devices.remember_inspection(state, model, "ab" * 32, False, _ANSWER)
    (remembered,) = (state / "models").glob("*.json")
    sealed = json.loads(remembered.read_text())
    if change == "edited":
        sealed["answer"]["outputs"][0]["shape"] = [None, 64, 64, 3]
        remembered.write_text(json.dumps(sealed))
    elif change == "another model's":
        devices.remember_inspection(state, model, "cd" * 32, False, _ANSWER)
        (other,) = set((state / "models").glob("*.json")) - {remembered}
        remembered.write_text(other.read_text())
    elif change == "unsealed":
        remembered.write_text(json.dumps(_ANSWER.to_dict()))
    else:
        elsewhere = tmp_path / "project"
        elsewhere.mkdir()
        devices.remember_inspection(elsewhere, model, "ab" * 32, False, _ANSWER)
        assert list(elsewhere.iterdir()) == []  # nothing written into a folder of the user's
        return
    assert devices.remembered_inspection(state, model, "ab" * 32, False) is None


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: one probe at a time")
def test_the_runtimes_are_probed_side_by_side_each_answer_in_its_place(
    fake_engine, tmp_path, monkeypatch
):
    """``segdiff devices`` asked six runtimes one after another (11.4 s on 2 cores, each child
    seconds of one core importing its framework); now their children run at once. Each fake
    probe here answers only once another probe has started: probes asked in turn never meet
    (the first gives up after a minute)."""
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    monkeypatch.setenv("FAKE_ENGINE_PROBE_MEET", str(meeting))
    found = devices.probe_runtimes(tmp_path / "state", ["jax", "tensorflow"], fresh=True)
    assert list(found) == ["jax", "tensorflow"]
    assert [answer["facts"]["runtime"] for answer in found.values()] == ["jax", "tensorflow"]
    assert sorted(path.name for path in meeting.iterdir()) == ["jax", "tensorflow"]


def test_ctrl_c_during_segdiff_devices_kills_every_probe_child(tmp_path):
    """Probes asked side by side are all stopped by one Ctrl-C: the command says it was
    interrupted and no probe child outlives it (each child runs in a session of its own, out
    of the terminal's reach)."""
    env = {**os.environ, "FAKE_ENGINE_PROBE_HANG": "1"}
    command = [sys.executable, str(TESTS / "fake_engine.py"), "cli", "devices",
               "--cache", str(tmp_path / "cache")]  # fmt: skip
    cli = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        asked = len(installed_runtimes(one_per_engine=True))
        while len(children := engine_children(cli.pid)) < min(2, os.cpu_count() or 1, asked):
            assert time.monotonic() < deadline, "no probe child started"
            time.sleep(0.05)
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=60)
    finally:
        cli.kill()
        for child in children:  # a hung probe of a failed test sleeps no hour after it
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
    assert cli.returncode == EXIT_INTERRUPTED, err
    assert err.decode().strip() == "segdiff: interrupted"
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def test_a_remembered_answer_that_is_no_plain_small_file_is_asked_again(tmp_path):
    """A remembered probe is a file in the cache's folder that anyone could have put there: a
    FIFO held the window's launch for ever (it was read whole, waiting for a writer), and a
    link to /dev/zero or a huge file would fill memory. Each is now ignored, in no time."""
    import threading

    state = tmp_path / "state"
    ResultCache(state).claim()
    remembered = state / "probe" / f"{devices._fingerprint()}.json"
    remembered.parent.mkdir(parents=True)
    good = {"devices": [{"name": "cpu", "type": "CPU"}], "facts": {}}
    remembered.write_text(json.dumps(good))
    assert devices.remembered_probe(state) == good
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(good))
    huge = json.dumps({**good, "padding": "x" * (2 << 20)})
    for made in (
        lambda: os.mkfifo(remembered),
        lambda: remembered.symlink_to(elsewhere),
        lambda: remembered.write_text(huge),
    ):
        remembered.unlink()
        made()
        found: list[object] = []

        def read(into: list[object] = found) -> None:
            into.append(devices.remembered_probe(state))

        # A daemon: a reader stuck on the FIFO must not hold the test run.
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(10)
        assert found == [None]
