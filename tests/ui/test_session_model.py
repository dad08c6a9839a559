"""The window's session, without widgets: what a session can do is asked of the model, its
request is one value the session plans from, and configurations added elsewhere (a diagnosis's
"run them") join the request, each on the matrix's devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.ui.session import BundleSession, MatrixSession
from segdiff_gui.ui.session_model import SessionModel, spec_configs
from tests.factories import bundle_of, labelled_runs


def _request(tmp_path: Path, *configs: RunConfig) -> MatrixRequest:
    cache = ResultCache(tmp_path / "cache")
    return MatrixRequest(tmp_path / "model.keras", (tmp_path / "a.png",), cache, configs)


def test_a_run_request_can_be_edited_and_run_until_its_runs_are_in_flight(tmp_path):
    session = MatrixSession(_request(tmp_path, RunConfig()))
    state = SessionModel(session=session)
    assert state.matrix is session and state.bundle is None
    assert state.editable is session
    assert state.request is session.request
    state.running = True
    assert state.editable is None  # nothing changes under runs in flight
    assert state.matrix is session  # its model is still at hand (layers, your maps)
    state.running = False
    assert state.editable is session


def test_a_bundle_is_read_only_and_has_no_request(tmp_path):
    state = SessionModel(session=MatrixSession(_request(tmp_path)))
    records = labelled_runs("model", "a.png", ["cpu b1 r0", "cpu b64 r0"])
    path = bundle_of(records, tmp_path / "b.h5", ResultCache(tmp_path / "source"))
    bundle = BundleSession(BundleReader(path))
    requests: list[object] = []
    state.events.request.connect(requests.append)
    state.session = bundle
    assert state.bundle is bundle
    assert state.matrix is None and state.editable is None
    assert state.request is None and requests == [None]
    assert state.configurations == []
    assert state.add_configs(["xla=on"]) is False  # nothing to add to


def test_a_request_written_on_the_model_is_the_one_its_session_plans(tmp_path):
    session = MatrixSession(_request(tmp_path, RunConfig()))
    state = SessionModel()
    heard: list[tuple[object, object]] = []
    state.events.request.connect(lambda new, old: heard.append((new, old)))
    state.session = session
    assert heard == [(session.request, None)]
    edited = MatrixRequest(**{**vars(session.request), "target": "a.png"})
    state.request = edited
    assert session.request is edited  # the session plans and runs this one now
    assert heard[-1] == (edited, heard[0][0])


def test_run_them_adds_each_configuration_on_every_device_of_the_matrix(tmp_path):
    configs = (RunConfig(), RunConfig(batch=64), RunConfig(device="gpu:0"))
    session = MatrixSession(_request(tmp_path, *configs))
    state = SessionModel(session=session)
    assert state.add_configs(["onednn=off", "batch=64,onednn=off", "device=cpu,xla=on"])
    added = session.request.configs[len(configs) :]
    assert added == (
        RunConfig(onednn=False),
        RunConfig(device="gpu:0", onednn=False),
        RunConfig(batch=64, onednn=False),
        RunConfig(device="gpu:0", batch=64, onednn=False),
        RunConfig(xla=True),  # it names its device: only there
    )
    assert session.request.configs[: len(configs)] == configs  # the matrix, as it was
    assert not state.add_configs(["onednn=off"])  # there already: not twice


def test_run_them_on_the_default_matrix_keeps_the_matrix_and_its_known_gpus(tmp_path):
    session = MatrixSession(_request(tmp_path))  # no configurations: the default matrix
    state = SessionModel(session=session, gpus=("gpu:0",))
    default = session.request.configurations(["gpu:0"])
    assert state.configurations == default
    state.add_configs(["threads=1"])
    assert session.request.configs == (
        *default,
        RunConfig(threads=1),
        RunConfig(device="gpu:0", threads=1),
    )


def test_a_configuration_that_cannot_be_read_is_refused_and_nothing_is_added(tmp_path):
    session = MatrixSession(_request(tmp_path, RunConfig()))
    state = SessionModel(session=session)
    with pytest.raises(ConfigError, match="xlaa"):
        state.add_configs(["xla=on", "xlaa=on"])
    assert session.request.configs == (RunConfig(),)


def test_a_line_names_its_configurations_on_each_device_unless_it_names_one():
    assert spec_configs("batch=8", ["cpu", "gpu:1"]) == [
        RunConfig(batch=8),
        RunConfig(device="gpu:1", batch=8),
    ]
    assert spec_configs("device=gpu:1,xla=off", ["cpu"]) == [RunConfig(device="gpu:1", xla=False)]
    base = RunConfig(threads=2)
    assert spec_configs("batch=4", ["cpu"], base) == [RunConfig(batch=4, threads=2)]


def test_a_session_written_again_is_news_and_its_request_is_not(tmp_path):
    """Opening the session on show again shows it anew (the analysis follows the event)."""
    session = MatrixSession(_request(tmp_path, RunConfig()))
    state = SessionModel(session=session)
    sessions: list[object] = []
    requests: list[object] = []
    state.events.session.connect(sessions.append)
    state.events.request.connect(requests.append)
    state.session = session
    assert sessions == [session]
    assert requests == []  # the same request: no news
