"""What a new user hit in the window (issue 49): failures said where the user looks, the
right-hand tables and the Explain dialog laid out for a 1366×768 screen, a near-constant map
on its own range, and the cutoff offered only where it decides (fast: synthetic runs and the
fake engine)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtWidgets import QLabel, QPushButton, QStatusBar

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.resources import demo_model
from segdiff_gui.ui.inspection import Loaded
from tests.exact_runs import study_run


def _softmax(rng: np.random.Generator, shape: tuple[int, int] = (12, 10)) -> np.ndarray:
    logits = rng.normal(size=(*shape, 3)).astype(np.float32)
    exps = np.exp(logits)
    return (exps / exps.sum(axis=-1, keepdims=True)).astype(np.float32)


def test_the_cutoff_is_disabled_for_a_softmax_map_and_says_why(window):
    """The cutoff stayed active for softmax maps, whose class argmax decides: it is disabled,
    its tooltip saying why, and offered again when a binary study is shown."""
    rng = np.random.default_rng(49)
    softmax = _softmax(rng)
    window.model.loaded = Loaded(
        runs=(
            study_run("cpu", RunConfig(), softmax),
            study_run("bf16", RunConfig(precision="mixed_bfloat16"), softmax[:, :, ::-1].copy()),
        )
    )
    cutoff = window.toolbar.cutoff
    for control in (cutoff.slider, cutoff.spin):
        assert not control.isEnabled()
        assert "argmax" in control.toolTip() and "softmax" in control.toolTip()
    sigmoid = rng.random((12, 10), dtype=np.float32)
    window.model.loaded = Loaded(runs=(study_run("cpu", RunConfig(), sigmoid),))
    for control in (cutoff.slider, cutoff.spin):
        assert control.isEnabled()
        assert "argmax" not in control.toolTip()


def test_a_near_constant_map_is_shown_on_its_own_range_when_asked(window):
    """A near-constant probability map showed as one flat colour on the 0–1 scale. The
    probability view offers the scale per view, as the difference views do (the one level
    box): each map then fills the colours over its own range, which its title and the colour
    bar say."""
    rng = np.random.default_rng(7)
    flat = (0.5 + rng.uniform(-3e-7, 3e-7, (16, 16))).astype(np.float32)
    other = np.nextafter(flat, np.float32(1))
    model, toolbar, grid = window.model, window.toolbar, window.grid
    model.loaded = Loaded(
        runs=(
            study_run("cpu b1", RunConfig(), flat),
            study_run("cpu b64", RunConfig(batch=64), other),
        )
    )
    assert model.mode.name == "probability" and model.level_mode == "shared"
    assert toolbar.level_action.isVisible()  # offered in the probability view too
    bar = grid.colour_bar.getAxis("left")
    assert grid.colour_bar.levels() == (0.0, 1.0) and "0 to 1" in bar.labelText
    images = [panel.data.image for panel in grid.panels.values()]
    assert all(np.unique(image).size <= 2 for image in images)  # one flat colour on 0–1

    toolbar.level_box.setCurrentIndex(1)
    assert model.level_mode == "per view"
    for panel, plane in zip(grid.panels.values(), (flat, other), strict=True):
        assert panel.data.image.min() == 0 and panel.data.image.max() == 255
        low, high = (format_float32(v) for v in (plane.min(), plane.max()))
        assert panel.title.whole.endswith(f" · {low} … {high}"), panel.title.whole
    assert "each view's own range" in bar.labelText


# Failures said where the user looks ------------------------------------------------------------
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
        assert any("fake failure on this image" in text for text in said), said
        assert not place.findChildren(QPushButton) or not any(
            "run again" in b.text() for b in place.findChildren(QPushButton) if b.isVisible()
        )
