"""The window beside an exact (float64) run: the "error against exact" view and the
inspector's exact value, each run's ULPs from it and whether its class is right (a bare model
on a study built in memory)."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.ui.inspection import InspectionModel, Loaded
from segdiff_gui.ui.inspector import PixelInspector
from segdiff_gui.ui.view_modes import view_mode
from tests.exact_runs import C32, CUT, assert_exact_pixels, bf16_study, exact_config, study_run


def _model(study: GroupAnalysis) -> InspectionModel:
    model = InspectionModel()
    model.cutoff = CUT
    model.loaded = Loaded(runs=tuple(study.runs), exact=study.exact)
    return model


def test_the_error_view_draws_each_run_minus_the_exact_map():
    model = _model(bf16_study())
    assert model.reference.label == "cpu r0" and model.study.exact.label == "fp64 r0"
    mode = view_mode("error against exact")
    drawn = mode.planes(model, model.reference)
    exact = model.study.exact.probabilities
    bf16 = next(run for run in model.runs if run.label == "bf16 r0")
    expected = (bf16.probabilities.astype(np.float64) - exact).astype(np.float32)
    assert np.array_equal(drawn.planes[bf16.key], expected)
    assert model.study.exact.key not in drawn.planes  # no view of its own
    top = float(np.abs(expected).max())
    assert drawn.bar == (-top, top) and drawn.bar_label == "Δ from exact"
    model.level_mode = "per view"
    per_view = mode.planes(model, model.reference)
    assert per_view.scale_text[model.reference.key] == "±3e-08"
    assert model.study.exact.key not in per_view.scale_text


def test_without_an_exact_run_the_error_view_says_how_to_get_one():
    study = bf16_study()
    model = _model(GroupAnalysis(study.runs, CUT))
    drawn = view_mode("error against exact").planes(model, model.reference)
    assert all(np.isnan(plane).all() for plane in drawn.planes.values())
    assert drawn.bar_label == "no exact run: add precision=float64"


def test_the_inspector_gives_the_exact_value_and_which_class_is_right(qtbot):
    model = _model(bf16_study())
    inspector = PixelInspector(model)
    qtbot.addWidget(inspector)
    model.selected_pixel = (0, 1)  # a hair below the cutoff: float32 rounds it onto it
    assert "float32 cannot decide its class" in inspector.title.text()
    lines = [line.split("\t") for line in inspector.as_tsv().splitlines()]
    assert lines[0][-1] == "ULPs from exact"
    rows = {cells[0]: cells for cells in lines[1:]}
    exact = rows["fp64 r0 (exact)"]
    assert exact[1] == np.format_float_positional(C32 - 1e-12, unique=True, trim="-")
    assert exact[2] == f"0x{int(np.float64(C32 - 1e-12).view(np.uint64)):016x}"
    assert (exact[5], exact[6]) == ("0", "—")
    cpu = rows["cpu r0 (reference)"]
    assert (cpu[5], cpu[6]) == ("1 ✗ wrong", "0")  # correctly rounded, yet on the other side
    model.selected_pixel = (0, 5)
    rows = {line.split("\t")[0]: line.split("\t") for line in inspector.as_tsv().splitlines()}
    assert rows["cpu r0 (reference)"][5] == "0 ✓" and rows["bf16 r0"][5] == "0 ✓"
    assert "cannot decide" not in inspector.title.text()


def test_the_inspector_marks_a_runs_tie_wrong_where_the_exact_map_decides(qtbot):
    """A bfloat16 run whose top classes are exactly equal has decided nothing: argmax's
    lowest class is the exact one at pixel 0, yet the tie is wrong; where the exact map is
    itself tied (pixel 1) the run is neither right nor wrong."""
    exact = np.array([[[0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.2, 0.3, 0.5]]])
    tied = np.array([[[0.4, 0.4, 0.2], [0.4, 0.3, 0.3], [0.2, 0.3, 0.5]]], np.float32)
    study = GroupAnalysis(
        [
            study_run("cpu", RunConfig(), exact.astype(np.float32)),
            study_run("bf16", RunConfig(precision="mixed_bfloat16"), tied),
        ],
        CUT,
        exact=study_run("fp64", exact_config(), exact),
    )
    model = _model(study)
    inspector = PixelInspector(model)
    qtbot.addWidget(inspector)

    def classes() -> dict[str, str]:
        rows = [line.split("\t") for line in inspector.as_tsv().splitlines()[1:]]
        return {cells[0]: cells[5] for cells in rows}

    model.selected_pixel = (0, 0)
    assert classes()["bf16 r0"] == "0 tie ✗ wrong: no class decided"
    assert classes()["cpu r0 (reference)"] == "0 ✓"
    model.selected_pixel = (0, 1)  # the exact map tied: no mark either way
    assert classes()["bf16 r0"] == "0" and classes()["cpu r0 (reference)"] == "0 tie"
    right = study.right_against_exact(study.runs[1])
    assert right is not None and right.tolist() == [[False, False, True]]


def test_without_an_exact_run_the_inspector_keeps_its_columns(qtbot):
    study = bf16_study()
    model = _model(GroupAnalysis(study.runs, CUT))
    inspector = PixelInspector(model)
    qtbot.addWidget(inspector)
    model.selected_pixel = (0, 1)
    assert inspector.as_tsv().splitlines()[0].split("\t")[-1] == "class"
    assert inspector.as_tsv().splitlines()[1].split("\t")[5] == "1"


def _exact_window(window_for, demo, exact_cache):
    """The window on the exact cache's runs (cpu, bfloat16 and the exact run), none run."""
    model_path, images = demo
    return window_for(
        model_path, images[0], "--cache", exact_cache, "--no-run",
        "--config", "batch=1", "--config", "precision=mixed_bfloat16",
        "--config", "precision=float64",
    )  # fmt: skip


def test_the_window_keeps_a_cached_exact_run_beside_its_views(window_for, demo, exact_cache):
    window = _exact_window(window_for, demo, exact_cache)
    model = window.model
    assert [run.label for run in model.runs] == ["cpu b1 r0", "cpu b1 bf16 r0"]
    assert set(window.grid.panels) == {run.key for run in model.runs}  # no view of its own
    assert model.loaded.exact.label == "cpu b1 fp64 r0"
    assert model.study.exact.probabilities.dtype == np.float64
    model.selected_pixel = (10, 10)
    rows = [line.split("\t")[0] for line in window.inspector.as_tsv().splitlines()]
    assert rows[-1] == "cpu b1 fp64 r0 (exact)"
    model.mode = view_mode("error against exact")
    assert window.grid.colour_bar.getAxis("left").labelText == "Δ from exact"
    # bfloat16's one flip is where the fake's reference is wrong (its exact value within a
    # ULP of the cutoff): drawn as a flip where the run is right.
    bf16 = model.runs[1]
    right = model.study.right_against_exact(bf16) & model.study.flips(bf16)
    assert int(right.sum()) == model.study.flip_count(bf16) == 1
    window.grid.refresh_overlays()
    assert 3 in np.unique(window.grid.panels[bf16.key].overlay.image)


def test_the_window_s_csv_export_gives_the_exact_value_and_class_at_each_pixel(
    window_for, demo, exact_cache, tmp_path, monkeypatch
):
    """File › Export flipped pixels writes what ``segdiff export --csv`` does, the
    exact run's value, class and decidability included (recomputed here)."""
    import csv

    from PySide6.QtWidgets import QFileDialog

    window = _exact_window(window_for, demo, exact_cache)
    target = tmp_path / "flips.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    window.model.focus_key = window.model.runs[1].key  # cpu b1 bf16 r0
    window.model.at_risk = True
    window.exports.export_csv()
    rows = list(csv.DictReader(target.open()))
    assert_exact_pixels(rows, window.model.study.exact.probabilities, window.model.cutoff)


def test_the_statistics_tab_has_each_run_against_the_exact_run(qtbot):
    from segdiff_gui.ui.stats_panel import StatsPanel

    model = _model(bf16_study())
    panel = StatsPanel(model)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    model.loaded = Loaded(runs=model.runs, exact=model.loaded.exact)  # a fresh group: drawn
    header = panel.table.horizontalHeaderItem(panel.table.columnCount() - 1).text()
    assert header == "vs exact"
    assert panel.table.item(0, 0).text() == "bf16 r0"
    assert panel.table.item(0, 6).text() == "≤1 ULP 0.00%, max 100,664 ULP, 4 wrong (1 undecidable)"
    text = panel.verdicts.text()
    assert "cpu r0 against the exact float64 map" in text
    assert "disagree on 3 pixels; the exact class agrees with cpu r0 at 3" in text
    model.loaded = Loaded(runs=model.runs)  # no exact run: the column goes
    assert panel.table.columnCount() == 6 and "exact" not in panel.verdicts.text()


def test_a_bundle_s_exact_run_stands_beside_its_group(exact_cache, tmp_path, capsys):
    from segdiff_gui.storage.bundle import BundleReader
    from segdiff_gui.ui.session import BundleSession
    from tests.conftest import segdiff_here

    bundle = tmp_path / "b.h5"
    assert segdiff_here(capsys, "bundle", bundle, "--cache", exact_cache).returncode == 0
    session = BundleSession(BundleReader(bundle))
    model = InspectionModel()
    assert session.show(model) == []
    assert [run.label for run in model.runs] == ["cpu b1 r0", "cpu b1 bf16 r0"]
    assert model.loaded.exact.label == "cpu b1 fp64 r0"
    assert model.study.exact_summary().run == "cpu b1 fp64 r0"
