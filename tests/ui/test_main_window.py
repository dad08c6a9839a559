"""The real main window on real demo results (pytest-qt, offscreen)."""

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QAction

from segdiff_gui.core.analysis import compare_maps, flip_mask
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.floatfmt import float32_bits, format_float32
from segdiff_gui.core.protocol import RunFailed, RunFinished
from segdiff_gui.io.masks import read_mask
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.window_layout import GRID_MINIMUM_WIDTH as _GRID_MINIMUM_WIDTH
from tests.conftest import copy_labelled, engine_children

pytestmark = pytest.mark.slow


def click_pixel(qtbot, window, row, column):
    qtbot.wait(50)  # let the views settle their range first
    panel = next(iter(window.grid.panels.values()))
    scene = panel.data.mapToScene(QPointF(column + 0.5, row + 0.5))
    point = window.grid.mapFromScene(scene)
    # pyqtgraph turns a press and a later release without a drag into a click.
    qtbot.mousePress(window.grid.viewport(), Qt.MouseButton.LeftButton, pos=point)
    qtbot.mouseRelease(window.grid.viewport(), Qt.MouseButton.LeftButton, pos=point, delay=30)


def test_every_view_shows_the_whole_image_at_the_same_size(window_for, fake_demo_cache, qtbot):
    # Titles of different lengths must not make some columns narrower: linked views of
    # different widths would each show a different part of the image.
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    qtbot.wait(100)  # the layout settles its sizes
    views = [panel.view for panel in window.grid.panels.values()]
    widths = {round(view.width()) for view in views}
    assert max(widths) - min(widths) <= 1
    (x0, x1), _ = views[0].viewRange()
    assert x0 <= 0 and x1 >= 256  # the whole width of the demo image is in view


def test_the_maps_get_their_share_however_wide_the_docks_contents(
    window_for, fake_demo_cache, qtbot
):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.analysis.sweep_panel.set_truth(Path("/a/very/long/folder" * 20) / "masks")
    window.resize(1100, 700)
    qtbot.wait(100)
    assert window.grid.width() >= _GRID_MINIMUM_WIDTH


def test_a_first_launch_gives_the_inspector_the_width_of_its_columns(
    window_for, fake_demo_cache, qtbot, tmp_path, fake_engine
):
    # A first launch: no saved layout, and no run yet (the demo computes in the background).
    window = window_for("--cache", tmp_path / "empty", "--no-run")
    assert not window.model.runs
    window.resize(1600, 900)
    qtbot.wait(50)
    window._share_width()
    qtbot.wait(50)
    window.model.set_runs(fake_demo_cache, fake_demo_cache.records())  # the runs arrive
    window.model.selected_pixel = (28, 140)
    qtbot.wait(50)
    table = window.inspector.table
    assert table.rowCount() == 10
    assert table.horizontalScrollBar().maximum() == 0  # every column in view
    assert window.grid.width() >= _GRID_MINIMUM_WIDTH


def test_a_laptop_screen_stacks_the_runs_behind_the_inspector(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    runs_dock, inspector_dock = window.docks
    window.resize(1180, 660)  # a first launch on a 1280 × 720 screen
    qtbot.wait(50)
    window._share_width()
    qtbot.wait(50)
    assert window.tabifiedDockWidgets(inspector_dock) == [runs_dock]
    assert window.grid.width() > 1180 // 2  # the maps get half the window, not a third
    assert window.inspector.table.horizontalScrollBar().maximum() == 0
    runs_dock.raise_()
    click_pixel(qtbot, window, 100, 120)
    assert not inspector_dock.visibleRegion().isEmpty()  # a click brings the values to front
    runs_dock.raise_()
    window.step_flip(1)  # so does walking to the next flipped pixel
    qtbot.wait(50)
    assert not inspector_dock.visibleRegion().isEmpty()
    window.resize(1600, 900)  # shared again on a wide window: side by side
    qtbot.wait(50)
    window._share_width()
    assert not window.tabifiedDockWidgets(inspector_dock)
    assert window.dockWidgetArea(runs_dock) == Qt.DockWidgetArea.LeftDockWidgetArea


def test_titles_too_long_for_a_narrow_window_are_elided_not_overlapped(
    window_for, fake_demo_cache, qtbot
):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.resize(1100, 700)
    qtbot.wait(100)
    for run in window.model.runs:
        title = window.grid.panels[run.key].title
        assert title.item.boundingRect().width() <= title.size().width()
        assert title.whole.startswith(run.label)  # the whole title stays at hand
    # However narrow a column gets, its title is cut in the middle, not spilled sideways.
    title = window.grid.panels[window.model.runs[0].key].title
    title.resize(60, title.size().height())
    assert "…" in title.text and title.item.boundingRect().width() <= 60


def test_clicking_a_pixel_shows_the_cached_bits(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    assert len(window.model.runs) == 10
    assert not window.toolbar.class_box.isVisibleTo(window)  # a sigmoid map: one class, no choice
    assert not any(action.isVisible() for action in window.toolbar.class_actions)
    click_pixel(qtbot, window, 100, 120)
    row, column = window.model.selected_pixel
    assert abs(row - 100) <= 1 and abs(column - 120) <= 1  # the click lands on whole screen pixels
    table = window.inspector.table
    labels = [table.item(i, 0).text().replace(" (reference)", "") for i in range(table.rowCount())]
    for index, label in enumerate(labels):
        (record,) = [r for r in fake_demo_cache.records() if r.label == label]
        cached = fake_demo_cache.read_run(record.key).probabilities[row, column]
        assert table.item(index, 1).text() == format_float32(cached)
        assert table.item(index, 2).text() == float32_bits(cached)
    assert window.inspector.as_tsv().startswith("run\tvalue\tbits")


def test_moving_the_cutoff_gives_the_flip_counts_of_core(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.toolbar.cutoff.spin.setValue(0.55)
    qtbot.waitUntil(lambda: window.model.cutoff == 0.55)
    reference = window.model.reference
    for run in window.model.runs:
        expected = compare_maps(reference.probabilities, run.probabilities, 0.55).flips
        assert int(window.model.flips(run).sum()) == expected
    total = sum(row["flips"] for row in window.model.study.rows())
    assert f"{total:,} flips in all" in window.toolbar.cutoff.count.text()
    window.toolbar.cutoff.slider.setValue(0.3)
    qtbot.waitUntil(lambda: window.model.cutoff == pytest.approx(0.3))
    assert window.toolbar.cutoff.spin.value() == pytest.approx(0.3)
    # Typed as a person types it: the cutoff changes on Enter, not at the first "0".
    spin = window.toolbar.cutoff.spin
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin.lineEdit(), "0.549857")
    assert window.model.cutoff == pytest.approx(0.3)
    qtbot.keyClick(spin.lineEdit(), Qt.Key.Key_Return)
    assert window.model.cutoff == 0.549857 and spin.text() == "0.549857"


def test_zooming_far_out_stops_and_the_whole_image_comes_back(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    qtbot.wait(100)  # the window has fitted the image once its layout settled
    view = next(iter(window.grid.panels.values())).view
    for _ in range(40):  # a mouse wheel spun hard
        view.scaleBy((4.0, 4.0))
    (x0, x1), (y0, y1) = view.viewRange()
    assert 256 < x1 - x0 <= 4 * 256 + 1 and 256 < y1 - y0 <= 4 * 256 + 1
    qtbot.wait(150)  # the overlays are pooled again once the zoom settles
    assert window.grid._overlay_factor <= 256  # never pooled coarser than the whole map
    window.grid.show_pixel(10, 10)
    view.scaleBy((0.01, 0.01))
    (whole,) = [a for a in window.findChildren(QAction) if a.text() == "&Whole image"]
    whole.trigger()
    (x0, x1), (y0, y1) = view.viewRange()
    assert x0 <= 0 and x1 >= 256 and y0 <= 0 and y1 >= 256


def test_export_writes_the_mask_core_computes(
    window_for, fake_demo_cache, qtbot, tmp_path, monkeypatch
):
    from PySide6.QtWidgets import QFileDialog

    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    target = tmp_path / "flips.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    window.exports.export_mask()
    reference = window.model.reference.probabilities
    expected = np.zeros(reference.shape, dtype=bool)
    for run in window.model.runs:
        expected |= flip_mask(reference, run.probabilities, window.model.cutoff)
    assert np.array_equal(read_mask(target), expected) and expected.any()


def test_modes_and_reference_switch_without_errors(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    for mode in ("difference", "ulp", "flips", "probability"):
        window.toolbar.mode_box.setCurrentText(mode)
        assert window.model.mode.name == mode
    window.toolbar.reference_box.setCurrentIndex(2)
    assert window.model.reference.key == window.toolbar.reference_box.itemData(2)
    window.step_flip(+1)
    assert window.model.selected_pixel is not None


def children_of_this_process():
    return engine_children()


def test_a_failed_run_is_shown_and_the_rest_complete(
    qtbot, models, small_images, tmp_path, fake_engine
):
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.session import MatrixSession

    cache = ResultCache(tmp_path / "cache")
    session = MatrixSession(
        MatrixRequest(
            models / "tiny.keras",
            tuple(small_images),
            cache,
            (
                RunConfig(),
                RunConfig(device="gpu:7"),
                RunConfig(batch=4),
            ),
            repeats=1,
        )
    )
    window = MainWindow(InspectionModel(), cache)
    window.set_session(session)
    qtbot.addWidget(window)
    messages = []
    said: list[str] = []  # the status bar, as it changed
    window.statusBar().messageChanged.connect(said.append)
    window.start_runs()
    window.worker.message.connect(messages.append)
    qtbot.waitUntil(lambda: window.worker is None, timeout=120_000)
    # What is computing is said while nothing shows yet, then how far it is; at the end the
    # progress gives way to the failure, kept in the status bar (the Runs panel says the end).
    assert said[0].startswith("computing 3 runs (each engine process first starts")
    assert "computed 2 of 3 runs…" in said
    assert said[-1] == ""
    assert window.problem_notice.in_status_bar.isVisibleTo(window)
    assert window.problem_notice.text.startswith("gpu:7 b1 r0 failed: ")
    assert window.run_panel.status.text() == "done: 2 computed, 0 cached, 1 failed"
    failed = [m for m in messages if isinstance(m, RunFailed)]
    assert [m.label for m in failed] == ["gpu:7 b1 r0"]
    assert sum(isinstance(m, RunFinished) for m in messages) == 2
    assert len(window.model.runs) == 2
    items = [window.run_panel.runs.item(i).text() for i in range(window.run_panel.runs.count())]
    assert any("gpu:7 b1 r0 — failed" in text for text in items)


def test_closing_while_running_cancels_and_leaves_no_child(
    qtbot, fake_engine, demo, small_images, tmp_path, monkeypatch
):
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.session import MatrixSession

    monkeypatch.setenv("FAKE_ENGINE_HANG_ON", "cpu b2 r0")
    cache = ResultCache(tmp_path / "cache")
    session = MatrixSession(
        MatrixRequest(
            demo[0],
            tuple(small_images),
            cache,
            (
                RunConfig(),
                RunConfig(batch=2),
            ),
            repeats=1,
        )
    )
    window = MainWindow(InspectionModel(), cache)
    window.set_session(session)
    qtbot.addWidget(window)
    window.show()
    window.start_runs()
    # A child says a run finished once the next has started (its writer stores one map while
    # the next computes): wait for both.
    qtbot.waitUntil(
        lambda: "running cpu b2 r0" in window.run_panel.status.text() and bool(window.model.runs),
        timeout=120_000,
    )
    assert children_of_this_process()
    window.close()
    assert window.worker is None or window.worker.isFinished()
    assert children_of_this_process() == []
    assert len(window.model.runs) == 1  # the finished run stayed


def test_exports_from_the_menu(window_for, fake_demo_cache, qtbot, tmp_path, monkeypatch):
    import csv
    import json

    from PySide6.QtWidgets import QFileDialog

    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    targets = iter(
        [tmp_path / "f.csv", tmp_path / "r.html", tmp_path / "r.json", tmp_path / "v.png"]
    )
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(next(targets)), ""))
    bf16 = next(run for run in window.model.runs if run.label == "cpu b1 bf16 r0")
    window.model.focus_key = bf16.key
    window.exports.export_csv()
    window.exports.export_report()
    window.exports.export_report()
    window.exports.export_views()
    rows = list(csv.DictReader((tmp_path / "f.csv").open()))
    expected = int(window.model.flips(bf16).sum())
    assert len(rows) == expected > 0
    assert (tmp_path / "r.html").read_text().count("data:image/png;base64,") == 3
    assert json.loads((tmp_path / "r.json").read_text())["reference"]["label"] == "cpu b1 r0"
    from PIL import Image

    with Image.open(tmp_path / "v.png") as picture:
        grid = window.grid  # the views as they are on screen, every run in them
        assert picture.size == (grid.width(), grid.height()) and picture.size[0] >= 320


def test_about_names_the_versions(window_for, demo_cache):
    window = window_for("--cache", demo_cache.root, "--no-run")
    text = window.about_text()
    assert "segdiff 0.1.0" in text and "PySide6" in text
    # `segdiff demo` probed this machine for the demo cache: TensorFlow's versions are known.
    assert "TensorFlow 2." in text and "devices: cpu" in text


def test_opening_a_bundle_by_drop_shows_its_runs_read_only(window_for, fake_demo_cache, tmp_path):
    from tests.conftest import segdiff

    bundle = tmp_path / "from-server.h5"
    assert (
        segdiff(
            "bundle", bundle, "cpu b1 r0", "cpu b1 bf16 r0", "--cache", fake_demo_cache.root
        ).returncode
        == 0
    )
    window = window_for("--cache", tmp_path / "empty-cache", "--no-run")
    window.open_paths([str(bundle)])
    assert [run.label for run in window.model.runs] == ["cpu b1 r0", "cpu b1 bf16 r0"]
    panel = window.run_panel
    assert not panel.run_button.isEnabled()
    # Nothing to edit or run: the panel lists the bundle's runs instead of the matrix editor.
    assert not panel.editor.isVisibleTo(panel) and not panel.run_button.isVisibleTo(panel)
    assert [panel.runs.item(i).text() for i in range(panel.runs.count())] == [
        "● cpu b1 r0 — cached",
        "● cpu b1 bf16 r0 — cached",
    ]
    assert panel.matrix_bar.format() == "2 runs, read-only"
    assert window.model.image is not None  # the bundle carries the target image
    window.open_paths(["/nonexistent/model.keras"])  # said in the window, not a crash
    assert "no such model file" in panel.problem.text() and not panel.problem.isHidden()


def test_editing_the_matrix_plans_it_and_shows_what_is_cached(window_for, fake_demo_cache):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    editor = window.run_panel.editor
    assert editor.knobs["XLA"].isChecked() and editor.knobs["bfloat16"].isChecked()
    assert editor.batch_sizes() == [1, 64] and editor.repeats.value() == 2
    editor.knobs["bfloat16"].setChecked(False)
    assert len(window.model.runs) == 8  # the bf16 runs left the matrix and the views
    editor.knobs["oneDNN off"].setChecked(True)
    items = [window.run_panel.runs.item(i).text() for i in range(window.run_panel.runs.count())]
    assert "○ cpu b1 onednn-off r0 — queued" in items
    assert window.run_panel.run_button.isEnabled()
    editor.repeats.setValue(1)
    assert len(window.session.plan.runs) == 5  # b1, b64, threads1, xla, onednn-off × 1


def test_the_run_panel_names_what_the_model_takes_and_gives(
    window_for, demo_cache, qtbot, monkeypatch
):
    window = window_for("--cache", demo_cache.root, "--no-run")
    qtbot.waitUntil(lambda: "input" in window.run_panel.model_info.text(), timeout=120_000)
    text = window.run_panel.model_info.text()
    assert "keras model · input 256×256×1 · output foreground 256×256×1 sigmoid" in text
    # The answer is remembered for this model file: the next window asks no child.
    from segdiff_gui.runner import devices

    def no_child(*args, **kwargs):
        raise AssertionError("a TensorFlow child was started for a model inspected before")

    monkeypatch.setattr(devices, "ask_child", no_child)
    again = window_for("--cache", demo_cache.root, "--no-run")
    qtbot.waitUntil(lambda: "input" in again.run_panel.model_info.text(), timeout=10_000)
    assert again.run_panel.model_info.text() == text


def test_a_model_refused_by_safe_mode_is_said_in_the_panel_with_the_control_that_trusts_it(
    qtbot, models, small_images, tmp_path, fake_engine
):
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.session import MatrixSession

    cache = ResultCache(tmp_path / "cache")
    window = MainWindow(InspectionModel(), cache)
    qtbot.addWidget(window)
    request = MatrixRequest(models / "lambda.keras", tuple(small_images), cache, (RunConfig(),))
    window.set_session(MatrixSession(request))
    panel = window.run_panel
    qtbot.waitUntil(lambda: "refused" in panel.model_info.text(), timeout=120_000)
    # The reason and the control, never a command-line flag.
    assert "Keras safe mode refuses" in panel.problem.text()
    assert "in Model settings, tick “trust this model”" in panel.problem.text()
    assert "--" not in panel.problem.text() + panel.model_info.text()
    assert panel.fix_button.text() == "Trust this model and run again"


def test_choosing_another_target_replans_on_that_image(window_for, fake_demo_cache, qtbot):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    images = window.run_panel.images
    assert images.count() == 16 and images.item(0).text() == "◎ cell_00.png"
    # The pictures follow the names, decoded in the background.
    qtbot.waitUntil(lambda: not any(images.item(i).icon().isNull() for i in range(16)))
    window.run_panel.target_chosen.emit(3)
    assert window.session.plan.images[window.session.plan.target].name == "cell_03.png"
    assert images.item(3).text() == "◎ cell_03.png"
    assert not images.item(3).icon().isNull()  # the same list: its pictures are kept
    assert window.model.runs == ()  # nothing cached for cell_03 yet: the views are empty
    assert window.run_panel.run_button.isEnabled()
    window.run_panel.editor.context.setCurrentText("copies")
    labels = [run.label for run in window.session.plan.runs]
    assert "cpu b64 copies r0" in labels


def test_probing_devices_offers_them_in_the_matrix(window_for, fake_demo_cache, qtbot, fake_engine):
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.sessions.questions.probe_devices()
    qtbot.waitUntil(
        lambda: "devices TensorFlow sees" in window.statusBar().currentMessage(), timeout=120_000
    )
    assert list(window.run_panel.editor.devices) == ["cpu"]  # no GPU on this machine


def test_a_softmax_model_flips_on_argmax_per_class_view(
    qtbot, models, small_images, softmax_cache, tmp_path
):
    """The session's softmax runs (``softmax_cache``, computed by a real child: the window's
    own real children are tests/ui/test_your_model.py's), batch 1 and bfloat16, in a cache of
    their own: the window's runs are served from it."""
    from segdiff_gui.core.analysis import class_map, tie_mask
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.session import MatrixSession

    cache = copy_labelled(softmax_cache, tmp_path / "cache", {"cpu b1 r0", "cpu b1 bf16 r0"})
    session = MatrixSession(
        MatrixRequest(
            models / "softmax3.keras",
            tuple(small_images),
            cache,
            (
                RunConfig(),
                RunConfig(precision="mixed_bfloat16"),
            ),
            repeats=1,
        )
    )
    window = MainWindow(InspectionModel(), cache)
    qtbot.addWidget(window)
    window.set_session(session)
    window.start_runs()
    qtbot.waitUntil(lambda: window.worker is None, timeout=120_000)
    model = window.model
    assert model.multiclass and window.toolbar.class_box.count() == 3
    assert all(action.isVisible() for action in window.toolbar.class_actions)  # a class to choose
    window.toolbar.class_box.setCurrentIndex(2)
    assert model.class_index == 2
    reference, other = model.reference, model.study.others[0]
    expected = class_map(reference.probabilities, 0.5) != class_map(other.probabilities, 0.5)
    # A pixel tied in either map is a tie, not a flip.
    expected &= ~(tie_mask(reference.probabilities) | tie_mask(other.probabilities))
    assert np.array_equal(model.flips(other), expected)
    model.cutoff = 0.9  # argmax does not care
    assert np.array_equal(model.flips(other), expected)
    row, column = 5, 7
    values = model.pixel_values(row, column)
    assert values[0].value == np.float32(reference.probabilities[row, column, 2])


def test_a_single_flip_in_a_large_map_stays_visible_zoomed_out(qtbot, tmp_path):
    from segdiff_gui.storage import ResultCache
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow
    from tests.benchmarks.synthetic import record

    reference = np.full((2048, 2048), 0.25, dtype=np.float32)
    other = reference.copy()
    other[1001, 1502] = 0.75  # the one pixel that changes class
    cache = ResultCache(tmp_path / "cache")
    for config, values in ((RunConfig(), reference), (RunConfig(batch=64), other)):
        cache.write_run(record("big.png", config, 0, values))
    window = MainWindow(InspectionModel(), cache)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    window.model.set_runs(cache, cache.records())
    panel = window.grid.panels[window.model.study.others[0].key]
    factor = window.grid._screen_factor()
    assert factor > 1  # 2048 pixels in a view a few hundred screen pixels wide
    qtbot.waitUntil(lambda: panel.overlay.image.shape[0] < 2048)  # once the layout settled
    # The overlay is pooled so the flip covers a whole screen pixel, over the whole map.
    image = panel.overlay.image
    assert image.shape == (2048 // factor, 2048 // factor)
    assert image[1001 // factor, 1502 // factor] == 1 and int(image.sum()) == 1
    assert panel.overlay.mapRectToParent(panel.overlay.boundingRect()).width() == 2048
    # At the map's own scale, the overlay is the flip mask itself again.
    window.grid._screen_factor = lambda: 1
    window.grid._repool_if_zoomed()
    assert panel.overlay.image.shape == (2048, 2048) and panel.overlay.image[1001, 1502] == 1


def test_a_new_window_that_runs_asks_no_inspection_child(qtbot, tmp_path, monkeypatch, fake_engine):
    # On a fresh cache the run child says what the model is; a child of its own
    # would take a core from the first map.
    from segdiff_gui.runner import devices
    from segdiff_gui.ui.app import build_window

    asked = []
    real = devices.ask_child
    monkeypatch.setattr(devices, "ask_child", lambda *a, **k: asked.append(a[0]) or real(*a, **k))
    cache = str(tmp_path / "fresh")
    window, _ = build_window(["--cache", cache, "--config", "batch=1", "--repeats", "1"])
    qtbot.addWidget(window)
    window.show()
    window.start_runs()  # as segdiff-gui does right after showing the window
    qtbot.waitUntil(lambda: window.worker is None, timeout=180_000)
    # What the (fake) run child said of its model: a fully convolutional one-channel sigmoid.
    said = "keras model · input ?×?×?×1 · output mask ?×?×1 sigmoid"
    assert said in window.run_panel.model_info.text()
    assert asked == []
    # The answer is remembered for the model file, as an inspection's would be.
    again, _ = build_window(["--cache", cache, "--no-run"])
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: said in again.run_panel.model_info.text(), timeout=10_000)
    assert asked == []
    window.close()
    again.close()
