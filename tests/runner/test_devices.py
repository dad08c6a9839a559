"""The remembered device probe: what it depends on, so that it is never stale in a way that
hides a GPU (issue 14, defect 8: installing the gpu extra left "no GPU" for a day)."""

import sys

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
