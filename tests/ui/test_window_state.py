"""The window's state is one evented model: every field declared once, every write heard of;
the toolbar's controls (the at-risk box among them) are views of its fields; and the view
modes are one table that every part reads (fast: synthetic records, no TensorFlow child)."""

from __future__ import annotations

import ast
from pathlib import Path
from unittest.mock import Mock

import numpy as np
import pytest
from PySide6.QtWidgets import QMenu

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui import view_modes
from segdiff_gui.ui.inspection import InspectionModel, LayerMap, Loaded
from segdiff_gui.ui.view_modes import VIEW_MODES, ViewMode, view_mode
from segdiff_gui.ui.view_planes import PlaneSource, ViewPlanes
from tests.exact_runs import study_run
from tests.factories import make_record, sealed

UI = Path(__file__).parents[2] / "segdiff_gui" / "ui"


def _records(labels: tuple[str, ...] = ("cpu b1 r0", "cpu b64 r0", "cpu b1 r1")) -> list:
    base = np.random.default_rng(3).random((12, 10), dtype=np.float32)
    return [
        sealed(make_record("m", base + np.float32(index * 0.02), label))
        for index, label in enumerate(labels)
    ]


@pytest.fixture
def loaded_model(tmp_path) -> tuple[InspectionModel, ResultCache, list]:
    cache = ResultCache(tmp_path / "cache")
    records = _records()
    for record in records:
        cache.write_run(record)
    model = InspectionModel()
    model.set_runs(cache, records)
    return model, cache, records


# A value other than the default for every field, from the model the fixture loads.
NEW_VALUES = {
    "loaded": lambda model, records: Loaded(),
    "reference_key": lambda model, records: records[1].key,
    "cutoff": lambda model, records: 0.25,
    "mode": lambda model, records: view_mode("ulp"),
    "level_mode": lambda model, records: "per view",
    "class_index": lambda model, records: 2,
    "selected_pixel": lambda model, records: (4, 7),
    "image_opacity": lambda model, records: 0.5,
    "at_risk": lambda model, records: True,
    "focus_key": lambda model, records: records[2].key,
    "layer_map": lambda model, records: LayerMap("conv", np.ones((3, 3), np.float32), "a → b"),
}


def test_every_field_of_the_model_is_in_the_write_test_below():
    assert set(NEW_VALUES) == set(InspectionModel.field_names())
    assert set(InspectionModel().events) == set(InspectionModel.field_names())


@pytest.mark.parametrize("name", list(NEW_VALUES))
def test_every_write_of_a_field_emits_its_event_once_with_the_new_and_old_value(name, loaded_model):
    model, _cache, records = loaded_model
    heard, others = Mock(), Mock()
    model.events[name].connect(heard)
    for other in InspectionModel.field_names():
        if other != name:
            model.events[other].connect(others)
    old = getattr(model, name)
    new = NEW_VALUES[name](model, records)
    setattr(model, name, new)
    assert getattr(model, name) is new or getattr(model, name) == new
    heard.assert_called_once()
    assert heard.call_args.args[0] is getattr(model, name)
    assert heard.call_args.args[1] is old or heard.call_args.args[1] == old
    others.assert_not_called()  # a write is news of its own field only
    setattr(model, name, getattr(model, name))  # the same value again: nothing to hear
    heard.assert_called_once()


def test_the_model_keeps_no_state_outside_its_fields(loaded_model):
    """Whatever the model is asked to do, what it holds is its fields (and the study it
    derives from them): nothing is written where no event would tell of it."""
    model, cache, records = loaded_model
    model.reference_key = records[1].key
    model.cutoff = 0.4
    model.selected_pixel = (1, 2)
    model.add_run(cache, records[0])
    model.add_read_runs(cache, [(records[0], None, None)])
    _ = model.study, model.focus_run, model.interesting_pixel(), model.flip_step(1, None)
    assert set(vars(model)) - {"events"} == {*InspectionModel.field_names(), "_cache"}


def test_new_runs_arrive_in_one_event_with_the_reference_and_layer_already_reset(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    first, second = _records(), _records(("cpu b1 r0", "cpu b8 r0"))
    second = [sealed(make_record("other", r.probabilities, r.label)) for r in second]
    for record in [*first, *second]:
        cache.write_run(record)
    model = InspectionModel()
    model.set_runs(cache, first)
    model.reference_key = first[2].key
    model.layer_map = LayerMap("conv", np.ones((3, 3), np.float32), "a → b")
    seen: list[tuple[str, object, object]] = []

    def on(name: str):
        return lambda *_: seen.append((name, model.runs, model.reference_key))

    for name in ("loaded", "reference_key", "layer_map"):
        model.events[name].connect(on(name))
    model.set_runs(cache, second)
    # Every listener sees the new runs against the default reference, without the layer.
    assert [name for name, _, _ in seen] == ["loaded", "reference_key", "layer_map"]
    assert all(runs == model.runs and key is None for _, runs, key in seen)
    assert model.layer_map is None and model.reference.label == "cpu b1 r0"


def test_a_write_is_checked_or_bounded_before_it_is_made(loaded_model):
    model, _cache, records = loaded_model
    heard = Mock()
    model.events.mode.connect(heard)
    with pytest.raises(ValueError, match="unknown view mode"):
        view_mode("classes")
    with pytest.raises(ValueError, match="unknown view mode"):
        model.mode = ViewMode("x", "&X", "", "", VIEW_MODES[0].planes, None)
    with pytest.raises(ValueError, match="level mode"):
        model.level_mode = "each"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="not on the maps shown"):
        model.selected_pixel = (12, 0)  # the maps are 12×10
    with pytest.raises(ValueError, match="no run"):
        model.reference_key = "0" * 64
    heard.assert_not_called()
    assert model.mode is VIEW_MODES[0] and model.selected_pixel is None
    model.cutoff = 1.5
    assert model.cutoff == 1.0
    model.image_opacity = -2.0
    assert model.image_opacity == 0.0


def test_the_study_follows_the_fields_whoever_wrote_them(loaded_model):
    model, cache, records = loaded_model
    first = model.study
    assert first is model.study  # made once
    model.reference_key = records[1].key
    assert model.reference.key == records[1].key
    model.cutoff = 0.3
    assert model.study.cutoff == np.float32(0.3) or model.study.cutoff == 0.3
    model.set_runs(cache, records[:2])
    assert model.reference.key == records[0].key  # new runs: the default reference again
    assert len(model.study.runs) == 2


# the toolbar: its controls are views of the model's fields ---------------------------------
def test_the_at_risk_box_and_the_model_stay_in_step_both_ways(window, qtbot, tmp_path):
    cache = ResultCache(tmp_path / "runs")
    records = _records()
    for record in records:
        cache.write_run(record)
    model, box = window.model, window.toolbar.at_risk_box
    model.set_runs(cache, records)
    assert not box.isChecked() and not model.at_risk
    box.click()  # the user ticks it
    assert model.at_risk
    panel = next(iter(window.grid.panels.values()))  # the reference's: no flip over it
    assert 2 in panel.overlay.image  # the at-risk pixels are shaded
    model.at_risk = False  # written elsewhere (a script, a saved state)
    assert not box.isChecked()
    assert 2 not in panel.overlay.image
    model.at_risk = True
    assert box.isChecked() and 2 in panel.overlay.image
    box.click()
    assert not model.at_risk


def test_the_toolbar_shows_every_field_it_writes_whoever_writes_it(window, tmp_path):
    cache = ResultCache(tmp_path / "runs")
    records = _records()
    for record in records:
        cache.write_run(record)
    model, toolbar = window.model, window.toolbar
    model.set_runs(cache, records)
    model.mode = view_mode("difference")
    assert toolbar.mode_box.currentText() == "difference" and toolbar.level_action.isVisible()
    model.level_mode = "per view"
    assert toolbar.level_box.currentIndex() == 1
    model.image_opacity = 0.5
    assert toolbar.opacity.value() == pytest.approx(0.5)
    model.reference_key = records[2].key
    assert toolbar.reference_box.currentData() == records[2].key
    toolbar.mode_box.setCurrentText("flips")
    assert model.mode is view_mode("flips") and not toolbar.level_action.isVisible()


def test_the_reference_box_grows_to_its_longest_run_when_runs_arrive(window, qtbot, tmp_path):
    """Shown while empty (a fresh window before its first run), the box was sized then and
    cut every label after it to "cpu b1 r(" ."""
    cache = ResultCache(tmp_path / "runs")
    base = np.random.default_rng(3).random((12, 10), dtype=np.float32)
    many = RunConfig(batch=64, threads=1, xla=True, precision="mixed_bfloat16", determinism=True)
    records = [
        sealed(make_record("m", base, "cpu b1 r0")),
        sealed(make_record("m", base + np.float32(0.02), "cpu b64 r0", config=many.to_dict())),
    ]
    for record in records:
        cache.write_run(record)
    box = window.toolbar.reference_box
    window.model.set_runs(cache, records)
    longest = box.itemText(1)
    assert longest == "cpu b64 det threads1 xla bf16 r0"
    qtbot.waitUntil(lambda: box.width() >= box.fontMetrics().horizontalAdvance(longest))


# the view modes' table ---------------------------------------------------------------------
def _view_menu(window) -> QMenu:
    return next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&View")


def test_the_toolbar_and_the_view_menu_offer_the_tables_modes_and_nothing_else(window):
    box = window.toolbar.mode_box
    offered = [(box.itemText(i), box.itemData(i, 3)) for i in range(box.count())]  # 3: tooltip
    assert offered == [(mode.name, mode.tip) for mode in VIEW_MODES]
    entries = [
        (action.text(), action.shortcut().toString())
        for action in _view_menu(window).actions()
        if action.text() in {mode.menu_text for mode in VIEW_MODES}
    ]
    assert entries == [(mode.menu_text, mode.shortcut) for mode in VIEW_MODES]


def _mode_names_outside_the_table() -> list[str]:
    """Where a ui module other than the table decides by a mode's name: compares with one,
    tests membership in a list of them, or keys a dict by them."""
    names = {mode.name for mode in VIEW_MODES}
    found = []
    for path in sorted(UI.glob("*.py")):
        if path.name == "view_modes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                parts = [node.left, *node.comparators]
                values = [
                    item
                    for part in parts
                    for item in ast.walk(part)
                    if isinstance(item, ast.Constant)
                ]
            elif isinstance(node, ast.Dict):
                values = [key for key in node.keys if isinstance(key, ast.Constant)]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "view_mode":
                values = []  # a lookup by name is the table's own answer
            else:
                continue
            found += [
                f"{path.name}:{value.lineno} {value.value!r}"
                for value in values
                if value.value in names
            ]
    return found


def test_no_part_of_the_window_decides_by_a_modes_name_but_the_table():
    assert _mode_names_outside_the_table() == []


def _absolute_difference(source: PlaneSource, reference) -> ViewPlanes:
    ref = source.plane(reference)
    planes = {run.key: np.abs(source.plane(run) - ref) for run in source.runs}
    top = max(float(plane.max()) for plane in planes.values()) or 1.0
    return ViewPlanes(planes, dict.fromkeys(planes, (0.0, top)), (0.0, top), "|Δ|", {})


def test_a_view_mode_added_as_one_row_is_offered_and_drawn(monkeypatch, qtbot, tmp_path):
    """Adding a mode is adding a row: the toolbar, the menu and the grid take it from there."""
    from segdiff_gui.ui.main_window import MainWindow

    row = ViewMode(
        name="|difference|",
        menu_text="&Absolute difference",
        tip="How far each run is from the reference, whichever way",
        shortcut="Ctrl+5",
        planes=_absolute_difference,
        colour_map="magma",
        scaled=True,
    )
    monkeypatch.setattr(view_modes, "VIEW_MODES", (*VIEW_MODES, row))
    cache = ResultCache(tmp_path / "runs")
    records = _records()
    for record in records:
        cache.write_run(record)
    window = MainWindow(InspectionModel(), ResultCache(tmp_path / "cache"))
    qtbot.addWidget(window)
    window.model.set_runs(cache, records)
    assert window.toolbar.mode_box.findText("|difference|") == len(VIEW_MODES)
    action = next(a for a in _view_menu(window).actions() if a.text() == "&Absolute difference")
    assert action.shortcut().toString() == "Ctrl+5"
    action.trigger()
    assert window.model.mode is row
    assert window.toolbar.mode_box.currentText() == "|difference|"
    assert window.toolbar.level_action.isVisible()
    grid = window.grid
    assert grid.colour_bar.isVisible() and grid.colour_bar.getAxis("left").labelText == "|Δ|"
    # The row's planes at its levels: the run furthest from the reference at the top.
    tops = sorted(int(panel.data.image.max()) for panel in grid.panels.values())
    assert tops == [0, 128, 255]  # Δ 0, 0.02 and 0.04 over levels [0, 0.04]
    window.close()


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
