"""The Runs panel's parts and the inspector, each built alone from a bare model (fast)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QFormLayout

from segdiff_gui.core.config import ModelSettings
from segdiff_gui.core.model_settings import MODEL_SETTINGS
from segdiff_gui.core.protocol import AllDone, PlanReady, RunFinished
from segdiff_gui.storage import ResultCache
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.inspector import PixelInspector
from segdiff_gui.ui.model_settings import ModelSettingsEditor
from segdiff_gui.ui.run_panel import RunPanel
from tests.factories import make_record


def test_a_model_of_several_outputs_is_not_offered_as_having_one(qtbot):
    editor = ModelSettingsEditor()
    qtbot.addWidget(editor)
    editor.set_outputs(["seg", "edge"])
    assert editor.output.currentText() == ""
    assert editor.output.lineEdit().placeholderText() == "choose one of 2"
    assert editor.settings().output.output is None
    editor.output.setCurrentText("edge")
    assert editor.settings().output.output == "edge"
    editor.set_outputs(["only"])
    assert editor.output.itemText(0) == "(the only one)"


def test_the_model_settings_editor_has_a_field_for_each_setting_and_mends_its_fixes(qtbot):
    editor = ModelSettingsEditor()
    qtbot.addWidget(editor)
    form = editor.layout()
    rows = {}
    for row in range(form.rowCount()):
        label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
        field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
        field = field or form.itemAt(row, QFormLayout.ItemRole.SpanningRole)
        widget = field.widget()
        text = label.widget().text() if label else getattr(widget, "text", lambda: "")()
        rows[text] = widget
    for setting in MODEL_SETTINGS:
        assert rows[setting.label].toolTip() == setting.tooltip, setting.name
        for choice in setting.choices[::-1]:  # each, the default last: every one a change
            assert editor.apply_fix(f"{setting.name}={choice}")
            assert rows[setting.label].currentText() == choice
        if setting.field == "check":
            assert editor.apply_fix(f"{setting.name}=on") and rows[setting.label].isChecked()
    assert editor.settings() == ModelSettings(trust_model=True, trust_preprocess=True)


def test_the_model_settings_editor_resizes_as_any_widget(qtbot):
    """mypy on the window found the resize box stored over QWidget.resize()."""
    editor = ModelSettingsEditor()
    qtbot.addWidget(editor)
    editor.resize(420, 380)
    assert editor.size().width() == 420
    editor.resize_box.setCurrentText("bilinear")
    assert editor.settings().preprocessing.resize == "bilinear"


def test_a_long_settings_summary_is_cut_and_whole_in_the_tooltip(qtbot):
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.settings.mean.setText("0.485,0.456,0.406")
    panel.settings.std.setText("0.229,0.224,0.225")
    panel.settings.color.setCurrentText("rgb")  # emits changed: the summary follows
    title = panel.settings_section.text()
    assert title.startswith("Model settings: mean 0.485") and title.endswith("…")
    assert len(title) <= len("Model settings: ") + 34
    assert panel.settings_section.toolTip().endswith("colour rgb")


def test_a_matrix_all_cached_says_so_and_a_new_plan_clears_the_last_footer(qtbot):
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.set_planned({"k1": "cpu b1 r0", "k2": "cpu b64 r0"}, {"k1", "k2"})
    panel.show_message(PlanReady(total=2, cached=2, children=0))
    assert panel.matrix_bar.format() == "all 2 runs cached"
    panel.show_message(AllDone(finished=0, cached=2, failed=0))
    assert panel.status.text() == "done: 0 computed, 2 cached, 0 failed"
    panel.set_planned({"k3": "cpu b1 r0"}, set())
    assert panel.status.text() == ""


def _inspecting_one_run(qtbot, tmp_path) -> tuple[InspectionModel, PixelInspector, ResultCache]:
    """An inspector showing pixel (2, 3) of one stored run, as read back from its cache."""
    model = InspectionModel()
    inspector = PixelInspector(model)
    qtbot.addWidget(inspector)
    cache = ResultCache(tmp_path / "cache")
    record = make_record("m", np.random.default_rng(0).random((8, 8), dtype=np.float32))
    cache.write_run(record)
    model.set_runs(cache, [cache.read_run(record.key, with_map=False)])
    model.selected_pixel = (2, 3)
    return model, inspector, cache


def test_the_inspector_empties_when_no_run_is_shown(qtbot, tmp_path):
    model, inspector, cache = _inspecting_one_run(qtbot, tmp_path)
    assert inspector.table.rowCount() == 1
    model.set_runs(cache, [])  # a new plan with nothing cached, or every run failed
    assert inspector.table.rowCount() == 0


def test_the_inspector_s_run_tip_says_what_the_run_computed_with(qtbot, tmp_path):
    """The run column's tooltip: its label, then its provenance's lines (device and runtime,
    oneDNN as it was in effect: the stored run's own, read back typed)."""
    _, inspector, _ = _inspecting_one_run(qtbot, tmp_path)
    assert inspector.table.item(0, 0).toolTip().splitlines() == [
        "cpu b1 r0 (reference)",
        "on cpu:0, tensorflow",
        "oneDNN on: TensorFlow's default on this CPU",
    ]


def test_a_thumbnail_keeps_its_images_shape(qtbot, tmp_path):  # qtbot: a QApplication
    """The review: an 80×100 photo's thumbnail was stretched to a square."""
    from PIL import Image

    from segdiff_gui.ui.widgets import thumbnail

    path = tmp_path / "tall.png"
    Image.fromarray(np.zeros((100, 80), dtype=np.uint8)).save(path)
    size = thumbnail(path).availableSizes()[0]
    assert size.height() == 56 and size.width() in (44, 45)  # 56 × 80/100, rounded


def test_a_thumbnail_over_the_image_memory_bound_is_not_decoded(qtbot, tmp_path, monkeypatch):
    """The window decoded every image for its thumbnails, whatever its
    header claimed; it is measured from its header first, like a request's images."""
    from PIL import Image

    from segdiff_gui.ui import widgets

    path = tmp_path / "a.png"
    Image.fromarray(np.zeros((100, 100), dtype=np.uint8)).save(path)  # 10 KB, 40 as float32
    monkeypatch.setenv("SEGDIFF_MAX_IMAGE_MEMORY", "50000")
    assert not widgets.thumbnail_image(path).isNull()
    monkeypatch.setenv("SEGDIFF_MAX_IMAGE_MEMORY", "49999")
    monkeypatch.setattr(widgets, "read_image", lambda path: pytest.fail("decoded"))
    assert widgets.thumbnail_image(path).isNull()


def test_a_thumbnail_makes_no_float_copy_of_the_whole_image(qtbot, tmp_path):
    """The window took 11.5 GB for a 16384² RGBA image: its thumbnail was drawn from a
    float64 copy of every pixel (8 GiB). It is drawn from every few pixels."""
    import tracemalloc

    from PIL import Image

    from segdiff_gui.ui.widgets import thumbnail_image

    path = tmp_path / "big.png"
    Image.fromarray(np.zeros((4096, 4096, 3), dtype=np.uint8)).save(path)  # 48 MiB decoded
    tracemalloc.start()
    try:
        assert not thumbnail_image(path).isNull()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * 48 * 2**20  # decoding takes two copies; a float64 one alone is 384 MiB


def test_a_colour_photo_s_thumbnail_is_in_colour(qtbot, tmp_path):
    """An RGB photo was listed in grey."""
    from PIL import Image

    from segdiff_gui.ui.widgets import thumbnail_image

    path = tmp_path / "photo.png"
    photo = np.zeros((90, 120, 3), dtype=np.uint8)
    photo[:30], photo[30:60], photo[60:] = (200, 30, 20), (20, 180, 40), (30, 40, 210)
    Image.fromarray(photo).save(path)
    image = thumbnail_image(path)
    assert (image.width(), image.height()) == (56, 42)  # its own shape, fitted
    for row, hue in ((5, 0), (21, 1), (37, 2)):  # red, green and blue stripes
        colour = image.pixelColor(28, row)
        channels = (colour.red(), colour.green(), colour.blue())
        assert max(range(3), key=channels.__getitem__) == hue, channels
        assert max(channels) - min(channels) > 100, channels  # coloured, not grey


def test_thumbnails_arrive_after_the_names_and_a_new_list_drops_the_old(qtbot, tmp_path):
    """The image list's pictures are decoded on a worker thread (the launch no longer waits
    for them); a file that cannot be read keeps its name without a picture."""
    from PIL import Image

    from segdiff_gui.ui.thumbnails import Thumbnails

    paths = [tmp_path / "a.png", tmp_path / "broken.png", tmp_path / "c.png"]
    for path in (paths[0], paths[2]):
        Image.fromarray(np.full((20, 30), 7, dtype=np.uint8)).save(path)
    paths[1].write_bytes(b"not an image")
    shown: list[int] = []
    thumbnails = Thumbnails(lambda index, icon: shown.append(index))
    icons = thumbnails.read(paths)
    assert len(icons) == 3 and all(icon.isNull() for icon in icons)  # names first
    qtbot.waitUntil(lambda: sorted(shown) == [0, 2])
    assert not thumbnails.icons[0].isNull() and thumbnails.icons[1].isNull()
    assert thumbnails.read(paths) is not thumbnails.icons and not thumbnails.read(paths)[2].isNull()

    shown.clear()
    thumbnails.read(paths[:1])  # another list: the first one's reader is dropped
    qtbot.waitUntil(lambda: shown == [0])
    qtbot.wait(50)
    assert shown == [0] and len(thumbnails.icons) == 1


def test_the_image_lists_pictures_are_read_once_the_list_has_painted(qtbot, tmp_path, monkeypatch):
    """The thumbnails' worker started at the event loop's first turn, before the
    window's first paint, and took the interpreter from it (Pillow's import and 16 decodes,
    ~60 ms of the launch on the demo's cache). A list not on screen reads nothing; shown and
    painted, it reads its pictures; a list dropped before then is never read."""
    from PIL import Image
    from PySide6.QtWidgets import QListWidget

    from segdiff_gui.ui import thumbnails as thumbnails_module
    from segdiff_gui.ui.thumbnails import Thumbnails

    paths = [tmp_path / "a.png", tmp_path / "b.png"]
    for path in paths:
        Image.fromarray(np.full((20, 30), 7, dtype=np.uint8)).save(path)
    decoded: list[str] = []  # every picture decoded, by any reader
    real = thumbnails_module.thumbnail_image
    monkeypatch.setattr(
        thumbnails_module,
        "thumbnail_image",
        lambda path: (decoded.append(path.name), real(path))[1],
    )
    listing = QListWidget()
    qtbot.addWidget(listing)
    shown: list[int] = []
    thumbnails = Thumbnails(lambda index, icon: shown.append(index), on_screen=listing.viewport())
    thumbnails.read(paths[:1])  # dropped for the next list before the list is on screen
    thumbnails.read(paths)
    qtbot.wait(100)  # the event loop turns: a reader started at its first turn would decode
    assert decoded == [] and shown == [] and all(icon.isNull() for icon in thumbnails.icons)

    listing.show()
    qtbot.waitExposed(listing)
    qtbot.waitUntil(lambda: sorted(shown) == [0, 1])
    qtbot.wait(50)
    assert decoded == ["a.png", "b.png"]  # the dropped list's reader never ran
    shown.clear()
    thumbnails.read(paths[1:])  # painted already: read at the next turn
    qtbot.waitUntil(lambda: shown == [0])


def test_the_statistics_plots_are_made_and_filled_when_the_tab_is_shown(qtbot, tmp_path):
    """Hidden at launch, the Statistics tab makes no plots (two pyqtgraph plots cost ~20 ms of
    every launch); shown, it makes them and draws what went stale: one curve per other run,
    the cutoff's marker, one outline per run in the histogram."""
    from segdiff_gui.ui.stats_panel import StatsPanel

    model = InspectionModel()
    panel = StatsPanel(model)
    qtbot.addWidget(panel)
    cache = ResultCache(tmp_path / "cache")
    rng = np.random.default_rng(1)
    values = rng.random((16, 16), dtype=np.float32)
    records = [make_record("m", values), make_record("m", values + 0.01, "cpu b64 r0")]
    for record in records:
        cache.write_run(record)
    model.set_runs(cache, records)
    assert panel.curve_plot is None and panel.histogram is None  # hidden: nothing made
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.table.rowCount() == 1 and panel.table.item(0, 0).text() == "cpu b64 r0"
    assert panel.curve_plot is not None and panel.histogram is not None
    assert len(panel.curve_plot.getPlotItem().listDataItems()) == 1
    assert panel.marker.value() == model.cutoff
    assert len(panel.histogram.getPlotItem().listDataItems()) == 1


def test_a_findings_run_them_link_asks_for_its_configurations(qtbot):
    """A remedy not measured is offered as a link that runs its configurations."""
    from PySide6.QtCore import QUrl

    from segdiff_gui.core.findings import Finding
    from segdiff_gui.ui.diagnosis_panel import DiagnosisPanel, findings_html
    from segdiff_gui.ui.inspection import InspectionModel

    finding = Finding("not measured", "Whether oneDNN off removes it…",
                      measure=("onednn=off", "batch=64,onednn=off"))  # fmt: skip
    html = findings_html([finding])
    assert 'href="segdiff-measure:onednn=off;batch=64,onednn=off">run them</a>' in html
    panel = DiagnosisPanel(InspectionModel())
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.measure_requested) as asked:
        panel.anchorClicked.emit(QUrl("segdiff-measure:onednn=off;batch=64,onednn=off"))
    assert asked.args == [["onednn=off", "batch=64,onednn=off"]]


def test_model_settings_take_your_own_preprocessing_function(qtbot, tmp_path):
    """The window's Model settings offer --preprocess and --trust-preprocess."""
    import pytest

    from segdiff_gui.core.errors import ConfigError

    code = tmp_path / "prepare.py"
    code.write_text("def prepare(image):\n    return image / 255.0\n")
    editor = ModelSettingsEditor()
    qtbot.addWidget(editor)
    editor.function.setText(f"{code}:prepare")
    settings = editor.settings()
    assert settings.preprocessing.function == "prepare.py:prepare"
    assert settings.preprocessing.function_file == str(code.resolve())
    assert not settings.trust_preprocess
    assert editor.apply_fix("trust_preprocess=on") and editor.settings().trust_preprocess
    editor.load(editor.settings())
    assert editor.function.text() == f"{code.resolve()}:prepare"
    editor.divide.setText("255")
    with pytest.raises(ConfigError, match="your function replaces divide"):
        editor.settings()
    editor.divide.setText("")
    editor.function.setText(f"{tmp_path / 'none.py'}:prepare")
    with pytest.raises(ConfigError, match="no such Python file"):
        editor.settings()


def test_the_cutoffs_count_names_the_float32_cutoff_it_counted_at(qtbot, tmp_path):
    """A cutoff of 0.5500041246414185 counts at the float32 0.5500041, and
    the count beside the cutoff box said "p ≥ 0.550004", another float32 cutoff."""
    from segdiff_gui.ui.cutoff_control import CutoffControl

    model = InspectionModel()
    control = CutoffControl(model)
    qtbot.addWidget(control)
    cache = ResultCache(tmp_path / "cache")
    values = np.full((4, 4), 0.25, np.float32)
    records = [make_record("m", values), make_record("m", values + 0.5, "cpu b64 r0")]
    for record in records:
        cache.write_run(record)
    model.set_runs(cache, records)
    model.cutoff = 0.5500041246414185
    assert control.count.text() == "16 flips in all (16 at most), p ≥ 0.5500041"
    model.cutoff = 0.55
    assert control.count.text().endswith("p ≥ 0.55")


def test_the_test_set_tab_says_how_many_images_a_change_is_over(qtbot, tmp_path):
    """In the window: a configuration on 1 of 4 images showed "(+0.00e+00)"
    beside its own mean Dice, not the reference's; its tab names the cutoff too."""
    from segdiff_gui.io.truth import TruthFolder
    from segdiff_gui.runner.sweeps import summarise_sweep, sweep_groups
    from segdiff_gui.ui.sweep_panel import SweepPanel
    from tests.factories import partial_sweep

    cache, masks = partial_sweep(tmp_path)
    summary = summarise_sweep(
        cache, sweep_groups(cache.records()), cutoff=0.5, truth=TruthFolder(masks)
    )
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.show_summary(summary)
    status = panel.status.text()
    assert "against <b>cpu b1</b> at cutoff 0.5;" in status
    assert "mean Dice 1.000000 (+0.00e+00 over 1 of 4 images)" in status
    assert "mean Dice 0.750000," not in status and "mean Dice 0.750000<br>" in status


def test_the_test_set_tab_of_merged_shards_says_what_is_missing(qtbot, tmp_path):
    """In the window: two shards of three, merged, are not shown as the whole set."""
    from dataclasses import replace

    from segdiff_gui.core.test_sets import SetCoverage
    from segdiff_gui.runner.sweeps import summarise_sweep, sweep_groups
    from segdiff_gui.ui.sweep_panel import SweepPanel
    from tests.factories import partial_sweep

    cache, _ = partial_sweep(tmp_path)
    summary = summarise_sweep(cache, sweep_groups(cache.records()), cutoff=0.5)
    whole = len(summary.images)
    missing = SetCoverage("ab" * 32, whole + 3, 3, whole, ((2, 3),), ("<b>x</b>.png",))
    summary = replace(summary, coverage=[missing])
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.show_summary(summary)
    status = panel.status.text()
    assert f"<b>{whole} of {whole + 3} images (incomplete)</b> against" in status
    assert "shard 2/3 (3 images) missing" in status
    assert "(&lt;b&gt;x&lt;/b&gt;.png)" in status  # a name is plain text


def test_the_matrix_bar_counts_every_run_listed(qtbot):
    """It said "matrix 2 / 2" while 12 runs were listed (see
    tests/runner/test_progress_counts_runs.py)."""
    panel = RunPanel()
    qtbot.addWidget(panel)
    labels = {f"k{i}": f"cpu b{i} r0" for i in range(12)}
    panel.set_planned(labels, {f"k{i}" for i in range(2, 12)})
    assert panel.matrix_bar.text() == "10 / 12 runs"
    panel.show_message(PlanReady(total=12, cached=10, children=1))
    assert panel.matrix_bar.text() == "10 / 12 runs"
    panel.show_message(RunFinished("k1", "cpu b1 r0", 0.1, "cpu:0"))
    assert panel.matrix_bar.text() == "11 / 12 runs"
    assert (panel.count.ended, panel.count.to_compute) == (1, 2)  # "computed 1 of 2 runs…"
