"""Names are text in the window: a run's label, an image's, a model output's
or a layer's name, a folder's path and an error that quotes one, each from a file, a model or a
bundle, are shown as the text they are by every label, tooltip and title, never laid out as
HTML (a name of nested tables froze the window for minutes)."""

from __future__ import annotations

import html
import time
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QIcon, QTextDocument
from PySide6.QtWidgets import QGraphicsItem, QLabel, QListWidget, QMenu, QTableWidget, QWidget

from segdiff_gui.core.layer_stats import LayerComparison, compare_layer
from segdiff_gui.core.protocol import ModelAnswer, RunFailed
from segdiff_gui.core.repair import RepairResult, Trial
from segdiff_gui.core.text import terminal_safe
from segdiff_gui.runner.layers import LayerProbe
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.layers import StoredComparison
from segdiff_gui.ui.inspection import InspectionModel, LayerMap
from segdiff_gui.ui.layers_view import LayersPanel
from segdiff_gui.ui.plain_text import as_html, plain_message_box, tooltip_text
from segdiff_gui.ui.repair_view import RepairDialog
from tests.factories import make_record
from tests.hostile.names import FORGED_LINE, HOSTILE_NAMES, NESTED_TABLES, RIGHT_TO_LEFT

MARKUP = "<table><tr><td>" * 3  # what a name of nested tables shows, when shown as text
FILE_NAME = "<table><tr><td>" * 16  # nested tables as a file's name can hold them: no "/"
# What no one-line title may show: a terminal escape, a newline, a right-to-left override.
CONTROLS = ("\x1b", "\x07", "\n", "\u202e")
PAINTED_WITHIN_S = 10.0  # the window with every hostile name; minutes before the fix


def _is_html(text: str, text_format: Qt.TextFormat) -> bool:
    """Whether a label (or a tooltip, AutoText) of ``text`` in ``text_format`` is HTML to Qt."""
    if text_format == Qt.TextFormat.RichText:
        return True
    return text_format == Qt.TextFormat.AutoText and Qt.mightBeRichText(text)


def _shown(text: str, text_format: Qt.TextFormat = Qt.TextFormat.AutoText) -> str:
    """The text Qt shows for ``text`` in ``text_format``."""
    if not _is_html(text, text_format):
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def _labels(root: QWidget) -> list[tuple[str, str]]:
    """Every label under ``root``: its text as set, and the text Qt shows."""
    return [
        (label.text(), _shown(label.text(), label.textFormat()))
        for label in root.findChildren(QLabel)
    ]


def _tooltips(root: QWidget, items: list[QGraphicsItem]) -> list[str]:
    """Every tooltip under ``root``: its widgets', their list and table items', its menus'
    actions' and those of ``items``."""
    tips = [widget.toolTip() for widget in root.findChildren(QWidget)]
    for view in root.findChildren(QListWidget):
        tips += [view.item(row).toolTip() for row in range(view.count())]
    for table in root.findChildren(QTableWidget):
        tips += [
            table.item(row, column).toolTip()
            for row in range(table.rowCount())
            for column in range(table.columnCount())
            if table.item(row, column) is not None
        ]
    for menu in root.findChildren(QMenu):
        tips += [action.toolTip() for action in menu.actions()]
    return tips + [item.toolTip() for item in items]


def _assert_text(set_texts: list[tuple[str, str]]) -> None:
    """No text is HTML with a name's markup in it (laid out as tables), and a name of nested
    tables is shown as the text it is."""
    for text, shown in set_texts:
        assert text == shown or "<table" not in text, f"laid out as HTML: {text[:80]!r}"
    assert any(MARKUP in shown for _text, shown in set_texts)


def _probe(reference: str, other: str, names: tuple[str, ...]) -> LayerProbe:
    """A layer probe of ``reference`` against ``other`` whose layers are named ``names``, every
    one differing."""
    rng = np.random.default_rng(4)
    same = rng.random((8, 8, 2), dtype=np.float32)
    moved = same.copy()
    moved[2, 3, 1] += 1e-4
    layers = tuple(compare_layer(name, same, moved) for name in names)
    spatial = {index: np.abs(moved - same).max(axis=-1) for index in range(len(names))}
    final = (np.full((8, 8), 0.4, np.float32), np.full((8, 8), 0.6, np.float32))
    stored = StoredComparison(
        "e" * 64, {"label": reference, "final": {"bitwise_equal": True}},
        {"label": other, "final": {"bitwise_equal": True}},
        LayerComparison(layers), spatial, final, "plain runs",
    )  # fmt: skip
    return LayerProbe(stored, tensors_kept=True, served_from_cache=False)


def test_every_label_tooltip_and_title_of_the_window_shows_names_as_text(window, tmp_path):
    window.resize(1600, 1000)
    narrowest = window.minimumSizeHint().width()  # with no names in it
    started = time.perf_counter()
    cache, model = window.cache, window.model
    base = np.random.default_rng(0).random((24, 20), dtype=np.float32)
    reference = make_record("m", base)
    cache.write_run(reference)
    records = [reference]
    for index, name in enumerate(HOSTILE_NAMES):
        record = make_record("m", base + np.float32((index + 1) * 1e-3), "cpu b64 r0", repeat=index)
        cache.write_run(record)
        # A run's label names its host when it came from another machine's bundle.
        records.append(replace(record, label=f"{name}: cpu b64 r{index}"))
    model.set_runs(cache, records)
    # The reference's label (with a right-to-left override) is in the status bar too.
    model.reference_key = records[1 + HOSTILE_NAMES.index(RIGHT_TO_LEFT)].key
    model.selected_pixel = (3, 4)
    window._show_hover(3, 4)
    # The Runs panel: the source, the images, the runs, a failure, the model, a problem.
    runs = window.run_panel
    runs.set_source(f"{NESTED_TABLES} on {HOSTILE_NAMES[1]} (6 images); cache {tmp_path}")
    runs.set_images(list(HOSTILE_NAMES), [QIcon()] * len(HOSTILE_NAMES), 0)
    runs.set_planned({f"k{index}": name for index, name in enumerate(HOSTILE_NAMES)}, set())
    runs.show_message(RunFailed(key="k0", label=NESTED_TABLES, error=f"{NESTED_TABLES} failed"))
    outputs = [{"name": name, "shape": [None, 24, 20, 1]} for name in HOSTILE_NAMES]
    runs.show_model(ModelAnswer("keras", [None, 24, 20, 1], outputs, ["sigmoid"] * 6))
    runs.show_problem(f"Cannot read {NESTED_TABLES}")
    runs.settings.set_outputs(list(HOSTILE_NAMES))
    runs.settings.output.setCurrentText(NESTED_TABLES)
    runs.settings.show_problem(f"no output named {NESTED_TABLES}")
    runs.show_settings()
    window.sessions.recent.remember([str(tmp_path / NESTED_TABLES)])
    # The Test set tab: a ground-truth folder and a sweep that failed.
    sweep = window.analysis.sweep_panel
    sweep.set_truth(tmp_path / FILE_NAME)
    window.analysis._sweep_failed(ValueError(f"cannot read {NESTED_TABLES}"))
    # The Layers tab, and a probed layer's map in the grid.
    layers = window.analysis.layers_panel
    probe = _probe(NESTED_TABLES, RIGHT_TO_LEFT, HOSTILE_NAMES)
    layers.show_probe(probe, probe.sentences(0.5))
    cells = [layers.table.item(row, 1).text() for row in range(layers.table.rowCount())]
    assert not any(c in cell for cell in cells for c in ("\n", "\x1b", "\u202e")), cells
    layers.set_busy(False, f"probing {NESTED_TABLES}")
    model.layer_map = LayerMap(NESTED_TABLES, np.ones((6, 5), np.float32), f"{NESTED_TABLES} → x")
    for tab in (layers, window.stats):  # the statistics' verdicts name every run
        window.tabs.setCurrentWidget(tab)
        window.grab()  # laid out and painted
    assert time.perf_counter() - started < PAINTED_WITHIN_S
    # A name is one word to Qt's line breaking: a label showing one at its own width made the
    # window 66,816 pixels wide (the 10,000-character name). No name widens the window.
    assert window.minimumSizeHint().width() == narrowest

    titles = [panel.title for panel in window.grid._all_panels()]
    assert len(titles) == len(records) + 1  # the runs' and the layer's
    _assert_text(_labels(window))
    tips = _tooltips(window, list(titles))
    _assert_text([(tip, _shown(tip)) for tip in tips])
    # A label of one line shows a control character as U+FFFD, a newline as no new line.
    one_line = (window.hover_label, runs.source, runs.model_info, layers.title, sweep.truth_label)
    for label in one_line:
        shown = _shown(label.text(), label.textFormat())
        assert not any(control in shown for control in CONTROLS), shown[:80]
    assert "out\ufffdgnp.exe" in window.hover_label.text()
    # The grid's titles are HTML to pyqtgraph: each shows its name as one line of text
    # (elided to its column), the whole name its tooltip.
    for title in titles:
        assert "<" not in title.text
        shown = title.item.toPlainText()
        assert shown == html.unescape(title.text)
        assert not any(control in shown for control in CONTROLS)
    assert all(_shown(title.toolTip()) == terminal_safe(title.whole) for title in titles[:-1])
    assert f"layer {NESTED_TABLES}, 6×5" in _shown(titles[-1].toolTip())
    assert titles[1].item.toPlainText().startswith("<t")
    assert titles[-1].item.toPlainText().startswith("layer <t")


def test_the_layers_tab_names_any_layer_and_braces_are_no_format(qtbot):
    """The chart's mark names the first differing layer through pyqtgraph's format string:
    a name with braces raised IndexError (or KeyError) out of show_probe."""
    panel = LayersPanel()
    qtbot.addWidget(panel)
    names = ("enc{value}/conv{0}", *HOSTILE_NAMES)
    probe = _probe(NESTED_TABLES, HOSTILE_NAMES[1], names)
    panel.show_probe(probe, probe.sentences(0.5))
    assert panel.table.rowCount() == len(names)
    marks = [item for item in panel.chart.getPlotItem().items if hasattr(item, "label")]
    assert marks[0].label.toPlainText() == "first differs: enc{value}/conv{0}"
    assert MARKUP in _shown(panel.title.text(), panel.title.textFormat())
    assert "born in enc{value}/conv{0}:" in _shown(panel.summary.text(), panel.summary.textFormat())


def test_dialogs_and_the_about_box_show_names_as_text(qtbot, monkeypatch, tmp_path):
    from segdiff_gui.ui import main_window

    before = Trial((), 16, 900, 60_000, "cpu b1 bf16")
    trials = (Trial((NESTED_TABLES,), 0, 0, 0),)
    result = RepairResult(
        "mixed_bfloat16", "cpu b1", before, trials[0], 0, 0.5, trials, 2, (NESTED_TABLES,)
    )
    dialog = RepairDialog(result, "")
    qtbot.addWidget(dialog)
    box = plain_message_box(None, "segdiff", f"Cannot open {NESTED_TABLES}", NESTED_TABLES)
    qtbot.addWidget(box)
    started = time.perf_counter()
    dialog.grab()
    box.grab()
    assert time.perf_counter() - started < PAINTED_WITHIN_S
    _assert_text(_labels(dialog))
    _assert_text(_labels(box))
    probe = {"devices": [{"name": NESTED_TABLES}], "facts": {"tf_version": "2.17"}}
    monkeypatch.setattr(main_window, "remembered_probe", lambda _root: probe)
    window = main_window.MainWindow(InspectionModel(), ResultCache(tmp_path / "cache"))
    qtbot.addWidget(window)
    about = window.about_text()
    assert "<b>segdiff" in about and "<table" not in about
    assert f"devices: {NESTED_TABLES}" in _shown(about)


@pytest.mark.parametrize("name", [*HOSTILE_NAMES, "a & b", "a &lt; b", "plain"])
def test_a_tooltip_and_html_show_the_text_as_it_is(qtbot, name):
    tip = tooltip_text(name)
    assert _shown(tip) == terminal_safe(name)  # a control character but \n and \t is U+FFFD
    # Escaped only where Qt would read HTML: an ordinary name is left as it is.
    assert tip == terminal_safe(name) or Qt.mightBeRichText(tip)
    document = QTextDocument()
    document.setHtml(f"<p>{as_html(name)}</p>")
    assert document.toPlainText() == name


def test_a_recent_file_and_the_settings_title_show_an_ampersand_as_it_is(window, tmp_path):
    """Qt reads ``&`` in a menu entry or a button as the mark of a shortcut letter: the recent
    file ``R&D model.keras`` was shown as ``RD model.keras``."""
    window.sessions.recent.remember([str(tmp_path / "R&D model.keras")])
    entry = window.sessions.recent.menu.actions()[0]
    assert entry.iconText() == "R&D model.keras"  # the text Qt shows, its marks taken out
    window.sessions.recent.remember([str(tmp_path / f"{FORGED_LINE}.keras")])
    assert window.sessions.recent.menu.actions()[0].iconText() == "pool\ufffdFAIL forged line.keras"
    runs = window.run_panel
    runs.settings.set_outputs(["a&b", "c"])
    runs.settings.output.setCurrentText("a&b")
    runs.show_settings()
    assert "output a&&b" in runs.settings_section.text()  # what the button shows: "a&b"
