"""The defects a new-user trial found in the window, each on a real widget or window built
from synthetic records (fast: no TensorFlow child is started)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QMenu

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.recent import RecentFiles
from tests.factories import bundle_of, make_record, menu_action, sealed


def _runs(name: str, target: str, labels: list[str], seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    base = rng.random((24, 20), dtype=np.float32)
    records = []
    for index, label in enumerate(labels):
        values = base + np.float32(index * 1e-3)
        records.append(
            sealed(make_record(name, values, label), target_name=target, target_hash="ab" * 32)
        )
    return records


def test_view_menu_items_and_their_shortcuts_switch_the_view(window):
    """Defect 1: each item logged TypeError: QComboBox.setCurrentText(bool)."""
    for text, mode, key in (
        ("&Difference", "difference", "Ctrl+2"),
        ("&Ulp", "ulp", "Ctrl+3"),
        ("&Flips", "flips", "Ctrl+4"),
        ("&Probability", "probability", "Ctrl+1"),
    ):
        action = menu_action(window, text)
        assert action.shortcut().toString() == key
        action.trigger()
        assert window.model.mode.name == mode
        assert window.toolbar.mode_box.currentText() == mode


def test_a_bundle_of_several_groups_offers_each_and_a_test_set(window, qtbot, tmp_path):
    """Defect 2: only the first group opened, with no way to choose another, and the Test set
    tab was disabled."""
    first = _runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0"])
    second = [
        sealed(r, target_hash="cd" * 32)
        for r in _runs("m", "b.png", ["cpu b1 r0", "cpu b64 r0"], seed=1)
    ]
    bundle = bundle_of([*first, *second], tmp_path / "two.h5", ResultCache(tmp_path / "source"))
    window.open_paths([str(bundle)])
    panel = window.run_panel
    assert not panel.groups.isHidden()
    titles = [panel.groups.itemText(i) for i in range(panel.groups.count())]
    assert titles == ["m.keras on a.png", "m.keras on b.png"]
    assert {r.target_name for r in window.model.records.values()} == {"a.png"}
    panel.groups.setCurrentIndex(1)
    assert {r.target_name for r in window.model.records.values()} == {"b.png"}
    sweep = window.analysis.sweep_panel
    assert sweep.sweep_button.isEnabled()
    sweep.sweep_button.click()
    qtbot.waitUntil(lambda: sweep.summary is not None, timeout=20_000)
    assert sorted(image.image for image in sweep.summary.images) == ["a.png", "b.png"]


def test_a_good_model_with_an_unreadable_image_is_said_in_the_window(window, tmp_path):
    """Defect 3: an unhandled InputError traceback on stderr, nothing in the window, and a
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
        _runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0"]), tmp_path / "b.h5",
        ResultCache(tmp_path / "source"),
    )  # fmt: skip
    window.open_paths([str(bundle)])
    assert problem.isHidden() and problem.text() == ""  # no stale message
    assert notice.in_status_bar.isHidden() and notice.over_views.isHidden()


def test_recent_files_keep_spaces_and_relative_paths_and_show_a_short_name(
    qtbot, tmp_path, monkeypatch
):
    """Defect 4: "Cannot open that: my: no such model file", and the demo's entry was one line
    of 17 paths."""
    from PySide6.QtCore import QSettings

    QSettings("segdiff", "segdiff-gui").remove("recent-paths")  # other tests opened files
    monkeypatch.chdir(tmp_path)
    opened: list[list[str]] = []
    menu = QMenu()
    recent = RecentFiles(menu, opened.append)
    recent.remember([Path("my model.keras"), Path("my images/cell 1.png")])
    recent.remember([Path("demo.keras"), *(Path(f"cell_{i:02}.png") for i in range(16))])
    texts = [action.text() for action in menu.actions()]
    assert texts == ["demo.keras + 16 images", "my model.keras + cell 1.png"]
    menu.actions()[1].trigger()
    assert opened == [[str(tmp_path / "my model.keras"), str(tmp_path / "my images/cell 1.png")]]
    assert RecentFiles(QMenu(), opened.append).entries()[0][0] == str(tmp_path / "demo.keras")


def test_the_inspectors_columns_stay_in_view_with_long_labels_on_a_1600_screen(window, qtbot):
    """Defect 5: Δ, ULPs and class were off the right edge until the splitter was dragged."""
    long = RunConfig(
        batch=64, context="copies", position=3, determinism=True, onednn=False, threads=8,
        xla=True, precision="mixed_bfloat16",
    )  # fmt: skip
    records = _runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0"])
    records.append(sealed(records[1], config=long.to_dict(), repeat=1))
    cache = ResultCache(window.cache.root.parent / "runs")
    for record in records:
        cache.write_run(record)
    window._share_width()
    qtbot.wait(50)
    window.model.set_runs(cache, records)
    window.model.selected_pixel = (3, 4)
    qtbot.wait(100)
    table = window.inspector.table
    assert table.rowCount() == 3 and "threads8" in table.item(2, 0).text()
    assert table.horizontalScrollBar().maximum() == 0  # every column in view
    # A layout remembered from a narrower session is widened when the window is shown again.
    from PySide6.QtCore import Qt

    window.resizeDocks([window.docks[1]], [240], Qt.Orientation.Horizontal)
    window.hide()
    window.show()
    qtbot.wait(100)
    assert table.horizontalScrollBar().maximum() == 0
    assert window.grid.width() >= 320


def test_per_view_levels_show_small_differences_beside_large_ones(window, qtbot, tmp_path):
    """Defect 10: the difference view's shared scale was set by bf16's ±0.0103, so the 1e-7
    differences of batch and XLA were invisible."""
    from segdiff_gui.ui.view_modes import view_mode

    base = np.random.default_rng(2).random((16, 16), dtype=np.float32)
    small = np.nextafter(base, np.float32(2))  # one ULP everywhere: ~6e-8
    large = base + np.float32(0.0103)
    records = [
        make_record("m", base, "cpu b1 r0"),
        make_record("m", small, "cpu b64 r0"),
        sealed(make_record("m", large, "cpu b1 r0"), config=RunConfig(
            precision="mixed_bfloat16").to_dict()),
    ]  # fmt: skip
    records = [sealed(r) for r in records]
    cache = ResultCache(tmp_path / "runs")
    for record in records:
        cache.write_run(record)
    model = window.model
    model.set_runs(cache, records)
    model.mode = view_mode("difference")
    shared = model.mode.planes(model, model.reference)
    small_key = next(r.key for r in model.runs if r.label == "cpu b64 r0")
    assert shared.levels[small_key][1] == pytest.approx(0.0103, rel=1e-3)
    assert window.toolbar.level_action.isVisible()  # offered in this mode
    window.toolbar.level_box.setCurrentIndex(1)
    assert model.level_mode == "per view"
    own = model.mode.planes(model, model.reference)
    assert own.levels[small_key][1] < 1e-6  # the 1-ULP run fills its own colour range
    assert own.scale_text[small_key].startswith("±6")
    assert own.bar_label == "Δ / each view's ±max"
    titles = [panel.title.whole for panel in window.grid.panels.values()]
    assert any("cpu b64 r0 · ±6" in title for title in titles)


def test_the_docs_name_the_views_as_the_window_does():
    """Defect 9: README named a "classes" view the window calls "flips" (the window's page of
    the documentation now lists them)."""
    import re

    from segdiff_gui.ui.view_modes import VIEW_MODES

    page = (Path(__file__).parents[2] / "docs" / "window.md").read_text()
    (listed,) = re.findall(r"switch the view \(([^;)]*)", page)
    assert [name.strip() for name in listed.split(",")] == [mode.name for mode in VIEW_MODES]


def test_a_large_bundle_shows_its_first_run_then_the_others_read_meanwhile(
    window, qtbot, tmp_path, monkeypatch
):
    """Issue 18: a bundle of large maps opens progressively; here every group is "large"."""
    from segdiff_gui.ui import session

    monkeypatch.setattr(session, "PROGRESSIVE_FROM_BYTES", 0)
    first = _runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0", "cpu b64 r1"])
    second = [
        sealed(r, target_hash="cd" * 32)
        for r in _runs("m", "b.png", ["cpu b1 r0", "cpu b64 r0"], seed=1)
    ]
    bundle = bundle_of([*first, *second], tmp_path / "two.h5", ResultCache(tmp_path / "source"))
    with qtbot.waitSignal(window.sessions.reading_finished, timeout=30_000):
        window.open_paths([str(bundle)])
        assert [run.label for run in window.model.runs] == ["cpu b1 r0"]
        assert window.sessions.reading
        assert window.statusBar().currentMessage() == "reading 2 more runs of the bundle…"
    assert not window.sessions.reading
    assert window.statusBar().currentMessage() == "showing 3 runs of the bundle"
    assert [run.label for run in window.model.runs] == ["cpu b1 r0", "cpu b64 r0", "cpu b64 r1"]
    for run, record in zip(window.model.runs, first, strict=True):
        assert run.probabilities.tobytes() == record.probabilities.tobytes()
    assert window.model.study is not None and len(window.model.study.others) == 2
    # Another group chosen while one is read: what the first reader still sends is dropped.
    panel = window.run_panel
    panel.groups.setCurrentIndex(0)
    window.open_paths([str(bundle)])
    assert window.sessions.reading
    with qtbot.waitSignal(window.sessions.reading_finished, timeout=30_000):
        panel.groups.setCurrentIndex(1)
    qtbot.wait(200)  # the first reader's last messages, had it not been stopped
    assert {r.target_name for r in window.model.records.values()} == {"b.png"}
    assert len(window.model.runs) == 2
