"""The matrix and its progress: every planned run with its state, a bar for the matrix and one
for the run in flight, Run and Cancel. Failures are listed here, never as a storm of dialogs."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)
from superqt import QCollapsible

from segdiff_gui.core.protocol import (
    AllDone,
    BatchProgress,
    ChildFatal,
    Message,
    ModelAnswer,
    PlanReady,
    RunCached,
    RunFailed,
    RunFinished,
    RunStarted,
    skipped_line,
)
from segdiff_gui.core.text import printable
from segdiff_gui.runner.outcome import RunCount
from segdiff_gui.ui.hints import fix_action
from segdiff_gui.ui.matrix_editor import MatrixEditor
from segdiff_gui.ui.model_settings import ModelSettingsEditor
from segdiff_gui.ui.plain_text import button_text, plain_label, tooltip_text

__all__ = ["RunPanel"]

_SUMMARY_CHARACTERS = 34
_CAPTION_CHARACTERS = 16  # an image's caption is cut to this many average characters' width
_CAPTION_GAP = 12  # pixels between two captions
_STATES = {
    "queued": "○",
    "cached": "●",
    "running": "◐",
    "finished": "●",
    "failed": "✕",
    "cannot be stored": "✕",
    "skipped": "⊘",
}
_RUN_TIP = "Compute every run of the matrix that is not cached yet"
_COUNTED = "%v / %m runs"  # the matrix bar: every run listed, the cached ones done


class RunPanel(QWidget):
    run_requested = Signal()
    cancel_requested = Signal()
    target_chosen = Signal(int)
    fix_requested = Signal(str)  # an error's fix (InputError.fix): apply it and run again
    problem_changed = Signal(str, str)  # the problem said (show_problem): its text and fix
    group_chosen = Signal(int)  # a bundle's model/image group to show

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source = plain_label(QLabel())  # the model's, images' or bundle's path
        self.source.setWordWrap(True)
        self.groups = QComboBox()
        self.groups.setToolTip("The bundle's model/image groups: which one the views show")
        self.groups.setVisible(False)
        self.groups.currentIndexChanged.connect(self._group_picked)
        self.settings = ModelSettingsEditor()
        # Collapsed while the defaults serve; its title says what is set.
        self.settings_section = QCollapsible(
            "Model settings: defaults", expandedIcon="▼", collapsedIcon="▶"
        )
        self.settings_section.addWidget(self.settings)
        self.settings.changed.connect(self._settings_summary)
        self.problem = plain_label(QLabel())
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020")
        self.fix_button = QPushButton()
        self.fix_button.setToolTip("Change that setting in Model settings and run again")
        self._fix = ""
        self.fix_button.clicked.connect(lambda: self.fix_requested.emit(self._fix))
        self.show_problem("")
        self.model_info = plain_label(QLabel())  # the model's output names, its errors
        self.model_info.setWordWrap(True)
        self.model_info.setToolTip("Asked of a TensorFlow child process, with Keras safe mode on")
        self.editor = MatrixEditor()
        self.images = QListWidget()
        self.images.setViewMode(QListWidget.ViewMode.IconMode)
        self.images.setIconSize(QSize(56, 56))
        # Captions apart, each cut in the middle to a bounded width (see set_images): names
        # never touch.
        self.images.setSpacing(_CAPTION_GAP // 2)
        # One row of pictures with their captions and the scroll bar; the spacing is around
        # each item, above and below too, so the row is taller by the whole gap.
        self.images.setMaximumHeight(92 + _CAPTION_GAP)
        self.images.setFlow(QListWidget.Flow.LeftToRight)
        self.images.setWrapping(False)
        self.images.setToolTip(
            "The images; the target is studied, the others fill batches. "
            "Double-click an image to make it the target."
        )
        self.images.itemDoubleClicked.connect(
            lambda item: self.target_chosen.emit(self.images.row(item))
        )
        self.runs = QListWidget()
        self.runs.setToolTip("● cached or finished, ◐ running, ○ queued, ✕ failed (hover for why)")
        self.matrix_bar = QProgressBar()
        self.matrix_bar.setFormat(_COUNTED)
        self.count = RunCount()  # what the matrix bar shows
        self.run_bar = QProgressBar()
        self.run_bar.setFormat("%p%")
        self.run_bar.setVisible(False)  # the run in flight: shown only while one is
        self.status = plain_label(QLabel())  # labels and names are text
        self.status.setWordWrap(True)
        self.run_button = QPushButton("Run missing")
        self.run_button.setToolTip(_RUN_TIP)
        self._refused = ""  # why the missing runs cannot be computed (see set_planned)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop now: the run in flight is lost, finished runs stay")
        self.cancel_button.setEnabled(False)
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.source)
        layout.addWidget(self.groups)
        layout.addWidget(self.model_info)
        layout.addWidget(self.problem)
        layout.addWidget(self.fix_button)
        layout.addWidget(self.images)
        # The settings and the matrix keep their height and scroll on a short screen, rather
        # than squashing their rows or pushing Run and Cancel out of the window.
        editors = QWidget()
        editor_layout = QVBoxLayout(editors)
        editor_layout.setContentsMargins(0, 0, 0, 0)
        editor_layout.addWidget(self.settings_section)
        editor_layout.addWidget(self.editor)
        editor_layout.addStretch(1)
        self.editors = QScrollArea()
        self.editors.setWidget(editors)
        self.editors.setWidgetResizable(True)
        self.editors.setFrameShape(QFrame.Shape.NoFrame)
        self.editors.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # No sideways scrolling: the panel is as wide as the editors need, and their scroll bar.
        scroll_bar = self.editors.verticalScrollBar().sizeHint().width()
        self.editors.setMinimumWidth(editors.minimumSizeHint().width() + scroll_bar)
        layout.addWidget(self.editors, 3)
        # A typo's message, under the line typed, is brought in view whole once laid out.
        self.editor.problem_said.connect(lambda: QTimer.singleShot(0, self._show_matrix_problem))
        self.runs.setMinimumHeight(90)
        layout.addWidget(self.runs, 1)
        layout.addWidget(self.matrix_bar)
        layout.addWidget(self.run_bar)
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        self._items: dict[str, QListWidgetItem] = {}
        # While a sweep runs: the other images' runs are counted, never listed (thousands).
        self.listed_only = False

    def _show_matrix_problem(self) -> None:
        label = self.editor.extra_problem
        if label.isVisible():
            self.editors.ensureWidgetVisible(label, 0, 0)

    def _group_picked(self, index: int) -> None:
        if index >= 0:  # -1: the box was emptied
            self.group_chosen.emit(index)

    def set_source(self, text: str) -> None:
        self.source.setText(printable(text))  # one line, of paths

    def set_groups(self, titles: list[str]) -> None:
        """A bundle's groups to choose from (hidden for one group or none)."""
        self.groups.blockSignals(True)
        self.groups.clear()
        self.groups.addItems(titles)
        self.groups.blockSignals(False)
        self.groups.setVisible(len(titles) > 1)

    def _settings_summary(self) -> None:
        summary = self.settings.summary()
        # A long summary must not widen the panel: cut, with the whole one as the tooltip.
        shown = (
            summary
            if len(summary) <= _SUMMARY_CHARACTERS
            else summary[: _SUMMARY_CHARACTERS - 1] + "…"
        )
        self.settings_section.setText(button_text(f"Model settings: {shown}"))
        self.settings_section.setToolTip(tooltip_text(f"Model settings: {summary}"))
        if summary != "defaults":
            self.settings_section.expand(animate=False)

    def show_settings(self) -> None:
        """Show Model settings (loaded, or pointed at by an error)."""
        self._settings_summary()

    def show_problem(self, text: str, fix: str = "") -> None:
        """Why a run (or the model, or the input) failed, kept in view, and a button that
        applies the fix where a setting mends it."""
        self.problem.setText(text)
        self.problem.setVisible(bool(text))
        self._fix = fix
        action = fix_action(fix) if text else ""
        self.fix_button.setText(action)
        self.fix_button.setVisible(bool(action))
        if fix and not fix.startswith("repeats"):  # the setting lives in Model settings
            self.settings_section.expand(animate=False)
        self.problem_changed.emit(text, fix)

    @property
    def fix(self) -> str:
        """The fix of the problem on show ("" where no setting mends it)."""
        return self._fix

    def set_images(self, names: list[str], thumbnails: list[QIcon], target: int) -> None:
        self.images.clear()
        metrics = self.images.fontMetrics()
        for index, (name, icon) in enumerate(zip(names, thumbnails, strict=True)):
            caption = metrics.elidedText(
                ("◎ " if index == target else "") + printable(name),
                Qt.TextElideMode.ElideMiddle,
                metrics.averageCharWidth() * _CAPTION_CHARACTERS,
            )
            item = QListWidgetItem(icon, caption)
            item.setToolTip(tooltip_text(f"{name} (target)" if index == target else name))
            self.images.addItem(item)
        if 0 <= target < len(names):
            self.images.scrollToItem(self.images.item(target))

    def set_thumbnail(self, index: int, icon: QIcon) -> None:
        """Image ``index``'s picture, read after its name was listed."""
        item = self.images.item(index)
        if item is not None:
            item.setIcon(icon)

    def forget_model(self) -> None:
        """Another model (or a bundle) is on show: what was said of the last one goes."""
        self.model_info.setText("")

    def show_model_pending(self) -> None:
        """The runs computing will say what the model is (their child loads it)."""
        self.model_info.setText("the model's input and outputs: said once its runs load it…")

    def show_model_refused(self) -> None:
        """The model was refused (untrusted, say): its facts are the problem said below."""
        self.model_info.setText("model refused (see below)")

    def show_model(self, answer: ModelAnswer | ChildFatal) -> None:
        """What the model takes and gives, or why safe mode (or anything else) refused it."""
        if isinstance(answer, ChildFatal):
            self.show_model_refused()
            return

        def dims(shape: list[int | None]) -> str:
            return "×".join("?" if d is None else str(d) for d in shape)

        outputs = ", ".join(
            f"{output['name']} {dims(output['shape'][1:])} {kind}"
            for output, kind in zip(answer.outputs, answer.kinds, strict=True)
        )
        policies = ", ".join(answer.dtype_policies) or "graph"
        self.model_info.setText(
            printable(  # one line, of the model's names
                f"{answer.format} model · input {dims(answer.input_shape)} · output {outputs} · "
                f"saved as {policies}"
            )
        )

    def set_planned(
        self,
        labels: dict[str, str],
        cached: set[str],
        refused: str = "",
        skipped: Sequence[tuple[str, str]] = (),
    ) -> None:
        """The matrix's runs, those cached marked; ``refused`` says why the others cannot be
        computed (a cache that cannot be written): they are marked so, and not offered.
        ``skipped``: the configurations the model cannot take (label, why), each listed so,
        why in its tooltip and under the list."""
        self.status.setText("")  # "done: …" was about the matrix before this one
        self.runs.clear()
        self._items = {}
        self._refused = refused
        uncached = "cannot be stored" if refused else "queued"
        for key, label in labels.items():
            item = QListWidgetItem()
            self._items[key] = item
            self.runs.addItem(item)
            state = "cached" if key in cached else uncached
            self._set_state(key, label, state, refused if state == "cannot be stored" else "")
        self._show_skipped(skipped)
        if skipped:
            self.status.setText(printable(" ".join(skipped_line(*s) for s in skipped)))
        self.count = RunCount(total=len(labels), cached=len(cached))
        missing = self.count.to_compute
        self._show_count()
        if missing and refused:
            self.matrix_bar.setFormat(f"{len(cached)} cached, {missing} cannot be stored")
        elif not labels:  # a bundle plans nothing: it is read-only
            self.matrix_bar.setFormat("read-only")
        self._offer_runs(missing > 0)

    def _show_count(self) -> None:
        """The matrix bar: every run listed, those cached done from the start, as the
        command line's and the API's bars count them (runner/outcome.RunCount)."""
        count = self.count
        self.matrix_bar.setRange(0, max(1, count.total))
        self.matrix_bar.setValue(count.done if count.total else 1)
        self.matrix_bar.setFormat(
            _COUNTED if count.to_compute else f"all {count.total} runs cached"
        )

    def _offer_runs(self, missing: bool) -> None:
        """Run missing is offered where runs are missing and they could be stored; where not,
        its tooltip says why."""
        self.run_button.setEnabled(missing and not self._refused)
        self.run_button.setToolTip(
            tooltip_text(f"Cannot compute the missing runs: {self._refused}")
            if self._refused
            else _RUN_TIP
        )

    def _show_skipped(self, skipped: Sequence[tuple[str, str]]) -> None:
        """A row for each configuration left out, why in its tooltip: a skipped
        configuration is said, never silently missing."""
        for label, why in skipped:
            self._set_state(f"skipped {label}", label, "skipped", why)

    def _set_state(self, key: str, label: str, state: str, tip: str = "") -> None:
        item = self._items.get(key)
        if item is None:
            item = QListWidgetItem()
            self._items[key] = item
            self.runs.addItem(item)
        item.setText(f"{_STATES[state]} {label} — {state}")
        item.setToolTip(tooltip_text(tip or state))

    def set_read_only(self, read_only: bool) -> None:
        """A bundle's runs, made elsewhere: no matrix to edit, no images to choose, nothing to
        run; the list shows the runs it holds."""
        widgets = (
            self.editors,
            self.images,
            self.run_button,
            self.cancel_button,
        )
        for widget in widgets:
            widget.setVisible(not read_only)
        if read_only:
            self.matrix_bar.setFormat(f"{self.runs.count()} runs, read-only")

    def set_running(self, running: bool, listed_only: bool = False) -> None:
        """``listed_only``: a sweep's, whose runs of the other images are counted by the
        matrix bar but not listed, nor said one by one (the Test set tab says how far it is)."""
        self.listed_only = running and listed_only
        self.run_bar.setVisible(running)
        self.cancel_button.setEnabled(running)
        self.editor.setEnabled(not running)  # a matrix in flight is not edited under it
        self.settings.setEnabled(not running)
        # Offer to run again only what is still missing: queued, failed or cancelled runs.
        missing = any(
            not item.text().endswith(("cached", "finished", "skipped"))
            for item in (self.runs.item(i) for i in range(self.runs.count()))
        )
        self._offer_runs(not running and missing)

    def listed(self, message: Message) -> bool:
        """Whether ``message`` is of a run this list shows (or of none): else only counted."""
        key = getattr(message, "key", None)
        return not self.listed_only or key is None or key in self._items

    def show_message(self, message: Message) -> None:
        self.count.add(message)
        if not self.listed(message):  # a sweep's run of another image
            if isinstance(message, RunFinished | RunFailed):
                self.matrix_bar.setValue(self.count.done)
            return
        if isinstance(message, PlanReady):
            self._show_skipped(message.skipped)
            if said := (*message.notices, *message.skipped_lines()):
                self.status.setText(printable(" ".join(said)))
            self._show_count()
        elif isinstance(message, RunCached):
            self._set_state(message.key, message.label, "cached")
        elif isinstance(message, RunStarted):
            self._set_state(message.key, message.label, "running")
            self.run_bar.setValue(0)
            self.status.setText(f"running {message.label}")
        elif isinstance(message, BatchProgress):
            self.run_bar.setRange(0, message.steps)
            self.run_bar.setValue(message.step)
        elif isinstance(message, RunFinished):
            self._set_state(
                message.key,
                message.label,
                "finished",
                f"{message.seconds:.2f} s on {message.device}",
            )
            self.matrix_bar.setValue(self.count.done)
        elif isinstance(message, RunFailed):
            self._set_state(message.key, message.label, "failed", message.error)
            self.matrix_bar.setValue(self.count.done)
            self.status.setText(f"{message.label} failed: {message.error}")
        elif isinstance(message, ChildFatal):
            self.status.setText(message.error)
        elif isinstance(message, AllDone):
            cancelled = " (cancelled)" if message.cancelled else ""
            self.status.setText(
                f"done{cancelled}: {message.finished:,} computed, "
                f"{message.cached:,} cached, {message.failed:,} failed"
            )
            self.run_bar.setValue(self.run_bar.maximum())
