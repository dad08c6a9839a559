"""A read-only cache in the window: its runs are shown, and only the runs it lacks are refused,
with the reason (fast: the fake engine's cache)."""

from __future__ import annotations

from segdiff_gui.resources import demo_images, demo_model
from tests.conftest import copy_labelled, read_only


def test_a_read_only_cache_shows_its_runs_and_refuses_only_the_missing_ones(
    window_for, fake_demo_cache, tmp_path, monkeypatch, engine_starts
):
    """The window said the runs of a read-only cache could be read, and showed
    none (the run list empty, the view black). Its cached run is shown; the one it lacks is
    marked, and Run missing is disabled with the reason as its tooltip."""
    cache = copy_labelled(fake_demo_cache, tmp_path / "cache", {"cpu b1 r0"})
    read_only(monkeypatch, cache)
    reason = f"{cache.root}: cannot be written (Read-only file system): the runs it holds"
    window = window_for(
        "--cache", cache.root, demo_model(), *demo_images(),
        "--config", "batch=1", "--config", "threads=1", "--repeats", "1",
    )  # fmt: skip
    assert [run.label for run in window.model.runs] == ["cpu b1 r0"]
    panel = window.run_panel
    rows = [panel.runs.item(i).text() for i in range(panel.runs.count())]
    assert rows == ["● cpu b1 r0 — cached", "✕ cpu b1 threads1 r0 — cannot be stored"]
    assert panel.matrix_bar.format() == "1 cached, 1 cannot be stored"
    assert not panel.run_button.isEnabled()
    assert reason in panel.run_button.toolTip()
    assert panel.problem.isVisible() and panel.problem.text().startswith(reason)
    assert engine_starts == []
