"""In the window: a sweep's Test set tab says its progress in batches and runs with
the time left, as the command line's bar counts them (runner/outcome.BatchCount), and stays
responsive on a set of a thousand images: the GUI thread does no work per run that grows with
the set. Counted, never timed: the summary and its table are made once, at the end; the tab is
written at most once per batch that ended (and when the plan is known, and at the end); the
Runs list holds the target's runs only. The runs are the fake engine's
(tests/fake_engine.py), of 8×8 images."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.core.config import RunConfig
from segdiff_gui.resources import demo_model
from segdiff_gui.runner.request import MatrixRequest

IMAGES = 1000
BATCH = 64


@pytest.fixture(scope="module")
def thousand_images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("thousand")
    rng = np.random.default_rng(52)
    paths = []
    for index in range(IMAGES):
        path = folder / f"img_{index:04d}.png"
        Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def test_a_sweep_of_a_thousand_images_says_its_batches_and_summarises_once(
    window, qtbot, thousand_images, fake_engine, monkeypatch
):
    from segdiff_gui.ui.session import MatrixSession

    request = MatrixRequest(
        demo_model(), tuple(thousand_images), window.cache, (RunConfig(batch=BATCH),), repeats=1
    )
    window.set_session(MatrixSession(request))
    panel = window.analysis.sweep_panel
    summaries: list[object] = []
    progress: list[tuple[str, int, int]] = []
    summary_of, progress_of = panel.show_summary, panel.show_progress
    monkeypatch.setattr(panel, "show_summary", lambda s: (summaries.append(s), summary_of(s)))
    monkeypatch.setattr(
        panel, "show_progress", lambda *shown: (progress.append(shown), progress_of(*shown))
    )
    window.analysis.sweep()
    assert not panel.cancel_button.isHidden() and not panel.sweep_button.isEnabled()
    qtbot.waitUntil(lambda: panel.summary is not None, timeout=300_000)
    batches = math.ceil(IMAGES / BATCH)  # 16: fifteen of 64, the last of the 40 left
    # Where it ended: every batch and run, and no time left to guess.
    assert progress[-1] == (f"{batches} of {batches} batches · 1,000 of 1,000 runs", 16, 16)
    assert progress[0][0] == "0 of 16 batches · 0 of 1,000 runs · estimating the time left"
    # Written when planned, at most once per batch that ended, and at the end: never per run.
    assert 2 <= len(progress) <= batches + 2
    assert [done for _, done, _ in progress] == sorted(done for _, done, _ in progress)
    # The summary and its thousand rows made once, after the runs.
    assert len(summaries) == 1 and len(panel.summary.images) == IMAGES
    assert panel.items.rowCount() == IMAGES
    assert panel.progress.isHidden() and panel.cancel_button.isHidden()
    # The Runs list: the target's run, not a thousand rows; its bar counts every run.
    runs = window.run_panel
    assert runs.runs.count() == 1
    assert (runs.matrix_bar.value(), runs.matrix_bar.maximum()) == (IMAGES, IMAGES)
    assert runs.status.text() == "done: 1,000 computed, 0 cached, 0 failed"


def test_a_sweep_cancelled_from_its_tab_summarises_the_runs_that_finished(
    window, qtbot, thousand_images, fake_engine, monkeypatch
):
    from segdiff_gui.ui.session import MatrixSession

    monkeypatch.setenv("FAKE_ENGINE_BATCH_S", "0.5")  # a pace to cancel at (never timed)
    images = tuple(thousand_images[:8])
    request = MatrixRequest(demo_model(), images, window.cache, (RunConfig(),), repeats=1)
    window.set_session(MatrixSession(request))
    panel = window.analysis.sweep_panel
    window.analysis.sweep()
    qtbot.waitUntil(lambda: panel.progress.value() >= 2, timeout=60_000)
    assert " of 8 batches · " in panel.status.text()
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: panel.summary is not None, timeout=60_000)
    assert 2 <= len(panel.summary.images) < 8  # what finished, summarised
    assert panel.sweep_button.isEnabled() and panel.cancel_button.isHidden()
    assert panel.progress.isHidden()


def test_other_files_opened_mid_sweep_leave_no_sweep_said_in_its_tab(
    window, qtbot, thousand_images, fake_engine, monkeypatch
):
    from segdiff_gui.ui.session import MatrixSession

    monkeypatch.setenv("FAKE_ENGINE_BATCH_S", "0.5")
    images = tuple(thousand_images[:8])
    request = MatrixRequest(demo_model(), images, window.cache, (RunConfig(),), repeats=1)
    window.set_session(MatrixSession(request))
    panel = window.analysis.sweep_panel
    window.analysis.sweep()
    qtbot.waitUntil(lambda: panel.progress.value() >= 1, timeout=60_000)
    window.set_session(MatrixSession(request))  # as File › Open does: the runs cancelled
    assert panel.progress.isHidden() and panel.cancel_button.isHidden()
    assert panel.sweep_button.isEnabled()
    assert panel.status.text() == "The sweep was cancelled: other files were opened."
