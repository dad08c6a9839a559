"""Failures said where the user looks: runs that fail, a model refused and an image that cannot
be read are said over the empty views and in the status bar, with the fix where a setting mends
it (fast: synthetic files and the fake engine)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtWidgets import QLabel, QPushButton, QStatusBar

from segdiff_gui.resources import demo_model
from segdiff_gui.storage import ResultCache
from tests.factories import bundle_of, labelled_runs


def _shown_texts(widget) -> list[str]:
    """The texts ``widget`` shows: its visible labels' and buttons' (a status bar's message
    too), whatever widgets say them."""
    texts = [widget.currentMessage()] if isinstance(widget, QStatusBar) else []
    for child in widget.findChildren(QLabel) + widget.findChildren(QPushButton):
        if child.isVisibleTo(widget.window()) and child.text():
            texts.append(child.text())
    return [text for text in texts if text]


def _button(widget, text: str) -> QPushButton:
    (button,) = [
        b
        for b in widget.findChildren(QPushButton)
        if b.isVisibleTo(widget.window()) and b.text() == text
    ]
    return button


def _wait_idle(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.worker is None, timeout=60_000)
    qtbot.wait(50)


def _picture(path: Path, shape: tuple[int, ...]) -> Path:
    Image.fromarray(np.random.default_rng(5).integers(0, 255, shape, dtype=np.uint8)).save(path)
    return path


def test_runs_that_fail_on_a_4_channel_image_say_why_over_the_empty_views_with_the_fix(
    window, qtbot, tmp_path, monkeypatch, fake_engine
):
    """Every run failed (an RGBA photo, an RGB model, no colour setting): the views were
    blank and the status bar empty; the reason was on the Runs tab only. The empty views and
    the status bar say it, each with the Runs tab's button, which mends it."""
    monkeypatch.setenv("FAKE_ENGINE_MODEL_INPUT", "16x16x3")
    photo = _picture(tmp_path / "photo.png", (16, 16, 4))
    window.open_paths([str(demo_model()), str(photo)])
    _wait_idle(qtbot, window)
    assert window.model.runs == ()
    fix = "Set colour to rgb and run again"
    for place in (window.grid, window.statusBar()):
        said = _shown_texts(place)
        assert any("photo.png" in text and "colour conversion" in text for text in said), said
        assert any(text.startswith("4 of 4 runs failed; cpu b") for text in said), said
        assert fix in said, said
    _button(window.grid, fix).click()  # the Runs tab's fix: colour rgb, and run again
    assert window.run_panel.settings.color.currentText() == "rgb"
    _wait_idle(qtbot, window)
    assert len(window.model.runs) == 4
    for place in (window.grid, window.statusBar()):
        assert not any("colour" in text for text in _shown_texts(place))


def test_a_lambda_model_refused_untrusted_is_said_in_the_status_bar_with_the_trust_button(
    window, qtbot, tmp_path, fake_engine
):
    model = tmp_path / "lambda.keras"
    with zipfile.ZipFile(model, "w") as archive:  # what Keras safe mode refuses, as saved
        archive.writestr("config.json", '{"class_name": "Lambda"}')
    image = _picture(tmp_path / "cell.png", (16, 16))
    window.open_paths([str(model), str(image)])
    _wait_idle(qtbot, window)
    assert window.model.runs == ()
    fix = "Trust this model and run again"
    for place in (window.grid, window.statusBar()):
        said = _shown_texts(place)
        assert any("Keras safe mode refuses" in text for text in said), said
        assert fix in said, said
    _button(window.statusBar(), fix).click()
    assert window.run_panel.settings.trust.isChecked()
    _wait_idle(qtbot, window)
    assert len(window.model.runs) == 4
    assert not any("safe mode" in text for text in _shown_texts(window.statusBar()))


def test_runs_left_out_for_an_image_of_another_size_are_said_in_the_status_bar(
    window, qtbot, tmp_path, monkeypatch, fake_engine
):
    """The batch-64 runs failed on a batch image of another size: the views showed fewer runs
    and nothing said why. The status bar does, with the fix; the views show what ran."""
    monkeypatch.setenv("FAKE_ENGINE_MODEL_INPUT", "16x16x1")
    target = _picture(tmp_path / "a_target.png", (16, 16))
    _picture(tmp_path / "b_larger.png", (20, 20))
    window.open_paths([str(demo_model()), str(target), str(tmp_path / "b_larger.png")])
    _wait_idle(qtbot, window)
    assert [run.label for run in window.model.runs] == ["cpu b1 r0", "cpu b1 r1"]
    said = _shown_texts(window.statusBar())
    assert any("b_larger.png" in text and "resizing" in text for text in said), said
    assert "Set resize to bilinear and run again" in said
    assert not any("b_larger.png" in text for text in _shown_texts(window.grid))  # maps shown


def test_runs_that_fail_with_no_setting_to_mend_them_are_said_in_the_status_bar(
    window, qtbot, tmp_path, monkeypatch, fake_engine
):
    monkeypatch.setenv("FAKE_ENGINE_FAIL_ON_IMAGE", "cell.png")
    image = _picture(tmp_path / "cell.png", (16, 16))
    window.open_paths([str(demo_model()), str(image)])
    _wait_idle(qtbot, window)
    assert window.model.runs == ()
    for place in (window.grid, window.statusBar()):
        said = _shown_texts(place)
        assert any(
            text == "4 of 4 runs failed; cpu b1 r0: fake failure on this image" for text in said
        ), said
        assert not place.findChildren(QPushButton) or not any(
            "run again" in b.text() for b in place.findChildren(QPushButton) if b.isVisible()
        )


def test_a_good_model_with_an_unreadable_image_is_said_in_the_window(window, tmp_path):
    """An unhandled InputError traceback on stderr, nothing in the window, and a
    stale message left behind."""
    from segdiff_gui.resources import demo_model

    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n and nothing else")
    window.open_paths([str(demo_model()), str(broken)])  # raised InputError before
    problem = window.run_panel.problem
    assert not problem.isHidden() and "broken.png" in problem.text()
    assert "not a readable image" in problem.text()
    notice = window.problem_notice  # in the status bar and over the empty views, kept
    assert notice.in_status_bar.isVisible() and "broken.png" in notice.status_text.text()
    assert notice.over_views.isVisible() and "broken.png" in notice.view_text.text()
    assert window.worker is None  # nothing was started
    bundle = bundle_of(
        labelled_runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0"]), tmp_path / "b.h5",
        ResultCache(tmp_path / "source"),
    )  # fmt: skip
    window.open_paths([str(bundle)])
    assert problem.isHidden() and problem.text() == ""  # no stale message
    assert notice.in_status_bar.isHidden() and notice.over_views.isHidden()
