"""What a new user hit in the window (issue 49): failures said where the user looks, the
right-hand tables and the Explain dialog laid out for a 1366×768 screen, a near-constant map
on its own range, and the cutoff offered only where it decides (fast: synthetic runs and the
fake engine)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QRegion
from PySide6.QtWidgets import QLabel, QPushButton, QStatusBar, QStyle

from segdiff_gui.core.config import RunConfig
from segdiff_gui.resources import demo_model
from segdiff_gui.ui.attribution_view import AttributionDialog
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
        # The title names the range, its ends told apart, each within the span of its value.
        low, high = (float(end) for end in panel.title.whole.split(" · ")[1].split(" … "))
        span = float(plane.max()) - float(plane.min())
        assert low < high and abs(low - plane.min()) < span and abs(high - plane.max()) < span
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


# The right-hand tables and the Explain dialog on a laptop's screen -----------------------------
# The window's first size on a 1366×768 screen (92% of it), that screen whole, the first size
# with no screen to ask, and the first size on a 1600×1000 screen.
LAPTOP_SIZES = [(1257, 707), (1366, 768), (1400, 860), (1472, 920)]


def _bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as float32."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def _demo_like_study_runs() -> Loaded:
    """The demo's matrix as the window shows it beside an exact run: its labels, and values
    as long as the demo's (float64 exact, bfloat16 far off, a few ULPs for XLA and batch 64)."""
    rng = np.random.default_rng(49)
    exact = 0.3 + 0.4 * rng.random((24, 24))
    exact[5, 5] = 0.49860265540317467
    cpu = exact.astype(np.float32)
    planes = {
        "cpu b1": (RunConfig(), cpu),
        "cpu b1 bf16": (RunConfig(precision="mixed_bfloat16"), _bfloat16(exact)),
        "cpu b1 threads1": (RunConfig(threads=1), cpu),
        "cpu b1 xla": (RunConfig(xla=True), np.nextafter(cpu, np.float32(1))),
        "cpu b64": (RunConfig(batch=64), np.nextafter(np.nextafter(cpu, 1), np.float32(1))),
    }
    runs = tuple(
        study_run(label, config, plane, repeat)
        for label, (config, plane) in planes.items()
        for repeat in (0, 1)
    )
    return Loaded(runs=runs, exact=study_run("cpu b1 fp64", RunConfig(precision="float64"), exact))


def _cut_texts(table) -> list[str]:
    """Every header and cell of ``table`` whose text is not shown whole: elided (narrower
    than its text, or, wrapped, lower than its lines), or out of the table's view (scrolled
    off, or beyond the part of the table on screen)."""
    style, header = table.style(), table.horizontalHeader()
    cut = []
    header_margin = style.pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    text_margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    shown = table.viewport().visibleRegion()
    for column in range(table.columnCount()):
        text = table.horizontalHeaderItem(column).text()
        needed = header.fontMetrics().horizontalAdvance(text) + 2 * header_margin
        if header.sectionSize(column) < needed:
            cut.append(f"header {text!r}: {header.sectionSize(column)} < {needed} pixels")
        metrics = table.fontMetrics()
        for row in range(table.rowCount()):
            item = table.item(row, column)
            if item is None or not item.text():
                continue
            rect = table.visualItemRect(item)
            width = rect.width() - 2 * text_margin
            if table.wordWrap():
                laid = metrics.boundingRect(
                    QRect(0, 0, width, 100_000), Qt.TextFlag.TextWordWrap, item.text()
                )
                fits = laid.width() <= width and laid.height() <= rect.height()
            else:
                fits = metrics.horizontalAdvance(item.text()) <= width
            if not fits:
                cut.append(f"cell {item.text()!r}: elided in {rect.width()}×{rect.height()}")
            elif shown.intersected(QRegion(rect)) != QRegion(rect):
                cut.append(f"cell {item.text()!r}: out of view at {rect}")
    return cut


def _label_cut(label: QLabel) -> bool:
    if label.wordWrap():
        return label.heightForWidth(label.width()) > label.height()
    return label.sizeHint().width() > label.width()


def _first_window(qtbot, tmp_path, monkeypatch, size, loaded=None):
    """The main window as a first launch opens it at ``size`` (no layout remembered): made,
    ``loaded`` shown (runs cached already), then shown and its width shared."""
    from PySide6.QtCore import QSettings

    from segdiff_gui.storage import ResultCache
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.window_layout import WindowLayout

    QSettings("segdiff", "segdiff-gui").clear()  # a first launch: no layout remembered
    monkeypatch.setattr(WindowLayout, "first_geometry", lambda layout: layout.window.resize(*size))
    window = MainWindow(InspectionModel(), ResultCache(tmp_path / "cache"))
    qtbot.addWidget(window)
    if loaded is not None:
        window.model.loaded = loaded
        window.model.selected_pixel = (5, 5)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(100)  # the width shared once shown
    assert (window.width(), window.height()) == size  # not widened past its first size
    return window


@pytest.mark.parametrize("size", LAPTOP_SIZES)
def test_on_a_laptop_screen_no_header_or_cell_of_the_inspector_or_statistics_is_cut(
    qtbot, tmp_path, monkeypatch, size
):
    """Beside an exact run, the Statistics tab showed about two rows, its "vs exact" cell
    wrapped onto five lines; the inspector's "vs exact" column was cut ("vs exa") and needed
    scrolling sideways. At the first size on a 1366×768 screen and the other first sizes, as
    the window shares its width the first time it is shown, every header and cell of both
    tables is whole and in view."""
    window = _first_window(qtbot, tmp_path, monkeypatch, size, _demo_like_study_runs())
    _assert_whole(window, qtbot, size)


@pytest.mark.parametrize("size", LAPTOP_SIZES[:3])
def test_on_a_laptop_screen_the_inspector_makes_room_for_an_exact_run_that_arrives_later(
    qtbot, tmp_path, monkeypatch, size
):
    """A first launch shares the width while the runs compute: the exact run's column and
    float64 value arrive later, and the inspector, stacked with the runs, widens for them."""
    window = _first_window(qtbot, tmp_path, monkeypatch, size)
    window.model.loaded = _demo_like_study_runs()
    window.model.selected_pixel = (5, 5)
    window.docks[1].raise_()  # in front of the runs, as a click on a pixel brings it
    qtbot.wait(100)
    _assert_whole(window, qtbot, size)


def _assert_whole(window, qtbot, size: tuple[int, int]) -> None:
    inspector = window.inspector.table
    assert inspector.rowCount() == 11 and inspector.columnCount() == 7
    assert _cut_texts(inspector) == []
    assert inspector.horizontalScrollBar().maximum() == 0
    window.tabs.setCurrentWidget(window.stats)
    qtbot.wait(100)
    stats = window.stats.table
    assert stats.rowCount() == 9 and stats.horizontalHeaderItem(6).text() == "vs exact"
    assert _cut_texts(stats) == []
    from segdiff_gui.ui.window_layout import maps_keep

    assert window.grid.width() >= maps_keep(size[0])  # the maps keep their share


def test_the_explain_dialogs_heading_is_whole_on_a_1366_screen(window, qtbot):
    """The Explain dialog's heading ran off its right edge."""
    from segdiff_gui.core.attribution import attribute, plan_attribution

    base, target = RunConfig(), RunConfig(precision="mixed_bfloat16")
    plan = plan_attribution(base, target)
    rng = np.random.default_rng(3)
    maps = {config: [rng.random((8, 8), dtype=np.float32)] for config in plan.configs()}
    dialog = AttributionDialog(attribute(plan, lambda c: maps.get(c, []), 0.5), True, window)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.width() <= 1366 and dialog.height() <= 768
    assert "What moves cpu b1 to cpu b1 bf16" in dialog.title.text()
    assert not _label_cut(dialog.title)
