"""Session control: what the window looks at (a run request or a bundle), planning it as the
matrix and the model's settings are edited, running what is missing in a worker, and opening
files. It talks to the Runs panel and the inspection model, and says things through one
``notify`` callable (the status bar); it knows nothing of the window's layout."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from segdiff_gui.core.artefacts import artefact_format
from segdiff_gui.core.errors import ConfigError, InputError, in_few_lines
from segdiff_gui.core.findings import plural
from segdiff_gui.core.protocol import (
    AllDone,
    ChildFatal,
    Message,
    ModelAnswer,
    PlanReady,
    RunFailed,
    RunFinished,
)
from segdiff_gui.core.text import printable
from segdiff_gui.io.images import collect_images
from segdiff_gui.runner.devices import gpu_names, remembered_probe
from segdiff_gui.runner.plan import MatrixPlan, check_model_path, check_source, is_model_path
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.bundle import BundleReader, is_bundle
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.ui.child_questions import ChildQuestions
from segdiff_gui.ui.group_reader import GroupReader
from segdiff_gui.ui.hints import with_control
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.recent import RecentFiles
from segdiff_gui.ui.run_panel import RunPanel
from segdiff_gui.ui.session import BundleSession, MatrixSession, Planner
from segdiff_gui.ui.session_model import SessionModel, matrix_of
from segdiff_gui.ui.thumbnails import Thumbnails
from segdiff_gui.ui.worker import MatrixWorker

__all__ = ["SessionController"]

Notify = Callable[[str, int], None]


class SessionController(QObject):
    worker_finished = Signal()
    worker_failed = Signal(object)  # the exception planning or running raised (said already)
    reading_finished = Signal()  # a large bundle group's last run has been read
    heard = Signal(object)  # each message of the runs in flight, once the Runs panel has it

    def __init__(
        self,
        model: InspectionModel,
        state: SessionModel,
        cache: ResultCache,
        panel: RunPanel,
        notify: Notify,
        recent: RecentFiles | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.model = model
        self.state = state  # the session, its request and whether runs are in flight
        self.cache = cache  # where a model opened in the window caches its runs
        self.panel = panel
        self.notify = notify
        self.recent = recent
        self.worker: MatrixWorker | None = None
        self._left_behind: list[MatrixWorker] = []  # cancelled workers, until they have ended
        # Some run could not be read (and was said so): the app then exits with code 2.
        self.unreadable_reported = False
        # The image list's pictures, read in the background.
        self.thumbnails = Thumbnails(panel.set_thumbnail, on_screen=panel.images.viewport())
        self.questions = ChildQuestions(panel, cache, notify, state)
        self._reader: GroupReader | None = None  # a large bundle group's other runs
        # Of the runs in flight: the failure said at their end (the last that a setting
        # mends, else the first), and whether a child's fatal error was said.
        self._failure: RunFailed | None = None
        self._fatal = False
        panel.run_requested.connect(self.start_runs)
        panel.cancel_requested.connect(self.cancel)
        panel.editor.changed.connect(self._matrix_edited)
        panel.settings.changed.connect(self._settings_edited)
        panel.target_chosen.connect(self._target_chosen)
        panel.fix_requested.connect(self.apply_fix)
        panel.group_chosen.connect(self._group_chosen)
        # The matrix the editor shows (configurations, repeats), as loaded or as read from it.
        self._shown: tuple[object, ...] | None = None
        state.events.request.connect(self._request_changed)

    @property
    def session(self) -> MatrixSession | BundleSession | None:
        return self.state.session

    # sessions -------------------------------------------------------------------------------
    def set_session(self, session: MatrixSession | BundleSession) -> None:
        """Look at a matrix (cached runs at once, the rest on request) or at a bundle."""
        self.cancel_and_wait()
        self._stop_reading()
        self._shown = None  # a new session's matrix is loaded
        matrix = matrix_of(session)
        if matrix is not None:  # the editor offers the devices known without asking a child
            probe = remembered_probe(matrix.request.cache.root)  # no TensorFlow
            self.state.gpus = tuple(gpu_names(probe)) if probe else ()
            self.panel.editor.set_devices(["cpu", *self.state.gpus])
        self.state.session = session  # the matrix editor and the analysis follow it
        self._request_changed(self.state.request)  # the same request again: shown anew
        self.questions.forget()
        self.panel.forget_model()  # another model's description must not stand over this one
        self.model.selected_pixel = None
        self.model.focus_key = None
        self.panel.show_problem("")
        bundle = self.state.bundle
        if bundle is not None:
            self._show_bundle(bundle)
        elif matrix is not None:
            self._show_matrix(matrix)

    def _show_bundle(self, session: BundleSession) -> None:
        session.read()
        titles = session.titles()
        self.panel.set_read_only(True)
        self.panel.set_groups(titles)
        self.panel.set_source(
            f"bundle {session.bundle.path}: {len(titles)} model/image group(s), read-only"
        )
        self._group_chosen(0)
        if self.recent is not None:
            self.recent.remember([session.bundle.path])
        self.report_unreadable(session.damaged)

    def _group_chosen(self, index: int) -> None:
        session = self.state.bundle
        if session is None:
            return
        self.model.selected_pixel = None
        self._stop_reading()
        still_to_read = session.show(self.model, index)
        self._show_read_runs()
        self.panel.set_read_only(True)
        if still_to_read:
            self._read_in_background(session, still_to_read)
        else:
            self.report_unreadable(self.model.unreadable)

    def _show_read_runs(self) -> None:
        shown = {run.key: run.label for run in self.model.runs}
        self.panel.set_planned(shown, set(shown))

    @property
    def reading(self) -> bool:
        """Whether runs of the bundle on show are still being read (a large group's)."""
        return self._reader is not None

    def _read_in_background(self, session: BundleSession, records: list[RunRecord]) -> None:
        reader = GroupReader(self.model, session.bundle, records, self._show_read_runs)
        reader.finished.connect(lambda: self._read_all(reader))
        self._reader = reader
        reader.start()
        # Until they join the grid, the window says that more runs are on their way.
        self.notify(f"reading {plural(len(records), 'more run')} of the bundle…", 0)

    def _read_all(self, reader: GroupReader) -> None:
        if self._reader is reader:
            self._reader = None
            self.notify(f"showing {len(self.model.runs)} runs of the bundle", 5000)
            self.report_unreadable(self.model.unreadable)
            self.reading_finished.emit()

    def _stop_reading(self) -> None:
        if self._reader is not None:
            self._reader.stop()
            self._reader = None

    def _show_matrix(self, session: MatrixSession) -> None:
        request = session.request
        self.panel.set_read_only(False)
        self.panel.set_groups([])
        self.panel.settings.load(request.settings)
        self.panel.show_settings()
        if self.recent is not None:
            self.recent.remember([request.model, *request.images])
        if self.replan():
            # Next turn of the event loop: runs started right after this (a new window, an
            # opened model) load the model anyway and say what it is; no child of its own.
            QTimer.singleShot(0, lambda: self._inspect_model(session))

    def open_paths(self, paths: Sequence[str]) -> None:
        """Open dropped or chosen files: a bundle, or a model and images (the model first: a
        drop's paths come in the order they were selected)."""
        try:
            bundles = [p for p in paths if Path(p).is_file() and is_bundle(Path(p))]
            if bundles:
                self.set_session(BundleSession(BundleReader(bundles[0])))
                return
            if not paths:
                raise InputError("", "give a model followed by its images, or a bundle")
            first, *rest = sorted(paths, key=lambda path: not is_model_path(path))
            model = check_model_path(first)
            images = collect_images(rest)
        except InputError as error:
            self._cannot_open(error)
            return
        self.set_session(MatrixSession(MatrixRequest(model, tuple(images), self.cache)))
        if self.panel.run_button.isEnabled():
            self.start_runs()

    def compares_with_source(self) -> bool:
        """Whether the session's model is the user's own artefact, which a Keras source can
        go beside."""
        session = self.state.matrix
        return session is not None and artefact_format(session.request.model) is not None

    def set_source(self, path: str) -> None:
        """Put the Keras model the session's artefact was converted from beside it:
        its runs join the artefact's, one study; a source that is not a Keras model, or does
        not fit the artefact, is said in the window."""
        session = self.state.editable
        if session is None:
            return
        try:
            source = check_source(session.request.model, Path(path))
        except InputError as error:
            self._cannot_open(error)
            return
        self.state.request = replace(session.request, source=Path(source.path))
        self.notify(
            f"{printable(source.name)} beside {printable(session.request.model.name)}: the "
            "artefact's runs are named with its file name",
            8000,
        )
        if self.replan() and self.panel.run_button.isEnabled():
            self.start_runs()

    def refuses_model(self, path: str) -> bool:
        """Whether ``path`` cannot be a model (said in the window, as a drop's would be)."""
        try:
            check_model_path(path)
        except InputError as error:
            self._cannot_open(error)
            return True
        return False

    def _cannot_open(self, error: InputError) -> None:
        # Said in the window, not in a modal dialog: a drop of the wrong file is no crisis.
        self.say_problem(f"Cannot open that: {error}")

    # planning -------------------------------------------------------------------------------
    def _matrix_edited(self) -> None:
        """The user changed the matrix: plan it, and show what of it is cached."""
        session = self.state.editable
        if session is None:
            return
        editor = self.panel.editor
        request = replace(
            session.request, configs=tuple(editor.configs()), repeats=editor.repeats.value()
        )
        self._shown = (request.configs, request.repeats)
        self.state.request = request
        self.replan()

    def _request_changed(self, request: MatrixRequest | None) -> None:
        """The matrix editor shows the request's matrix: loaded again where it is not the one
        shown (a new session's, configurations added), never over the editor's own edit (its
        text stays as typed)."""
        if request is None or (request.configs, request.repeats) == self._shown:
            return
        self._shown = (request.configs, request.repeats)
        self.panel.editor.load(self.state.configurations, request.repeats)

    def add_configs(self, specs: Sequence[str], run: bool = False) -> None:
        """Add configurations (``key=value`` specs) to the request (the matrix editor shows
        them), plan, and with ``run`` compute what is missing (a diagnosis's "run them", a
        reproduction's match shown beside the others)."""
        if self.state.editable is None:
            return
        try:
            self.state.add_configs(specs)
        except ConfigError as error:
            self.say_problem(str(error))
            return
        self.replan()
        if run:
            self.start_runs()

    def _settings_edited(self) -> None:
        """The model's settings changed: they are part of every run's key; plan again."""
        session = self.state.editable
        if session is None:
            return
        try:
            settings = self.panel.settings.settings()
        except ConfigError as error:
            self.panel.settings.show_problem(str(error))
            return
        trust_changed = settings.trust_model != session.request.settings.trust_model
        self.state.request = replace(session.request, settings=settings)
        if self.replan() and trust_changed:
            self._inspect_model(session)  # a model refused untrusted may load now

    def replan(self) -> bool:
        """Plan the session's request on the GUI thread and show what is cached; a problem
        with the input (an unreadable image, a bad setting) is said in the Runs panel."""
        session = self.state.matrix
        assert session is not None
        try:
            plan = session.plan_now()
        except (InputError, ConfigError) as error:
            fix = getattr(error, "fix", "")
            self.say_problem(str(error), fix)
            if fix == "trust_model=on":  # refused before it was read: no child to ask
                self.panel.show_model_refused()
            # What was opened, as given: the last model's name and images must not stand over it.
            paths = [Path(path) for path in session.request.images]
            names = [path.name for path in paths]
            target = session.request.target
            self._show_inputs(paths, names, names.index(target) if target in names else 0)
            self.panel.set_planned({}, set())
            self.model.set_runs(session.cache, [])
            return False
        # A cache that cannot be written: its runs are shown, the others not offered.
        refused = str(plan.unwritable) if plan.unwritable is not None else ""
        self.panel.show_problem(refused)
        self.panel.set_planned(
            {run.key: run.label for run in plan.runs},
            {run.key for run in plan.cached},
            refused,
            [(skip.label, str(skip.reason)) for skip in plan.skipped],
        )
        paths = [Path(image.path) for image in plan.images]
        self._show_inputs(paths, [image.name for image in plan.images], plan.target)
        cached = [session.cache.read_run(run.key, with_map=False) for run in plan.cached]
        cached += imported_beside(session, plan)
        self.report_unreadable(plan.damaged, " (to be computed again)")
        self.model.selected_pixel = None
        self.model.set_runs(session.cache, cached)
        self.report_unreadable(self.model.unreadable)
        return True

    def _show_inputs(self, paths: Sequence[Path], names: Sequence[str], target: int) -> None:
        """The session's model and images in the Runs panel: the line over it, and the image
        list (each picture read in the background)."""
        session = self.state.matrix
        assert session is not None
        on = f" on {names[target]}" if names else ""
        self.panel.set_source(
            f"{session.request.model.name}{on} ({plural(len(names), 'image')}); "
            f"cache {session.cache.root}"
        )
        self.panel.set_images(list(names), self.thumbnails.read(paths), target)

    def _target_chosen(self, index: int) -> None:
        session = self.state.matrix
        if session is not None and session.plan:
            self.show_target(session.plan.images[index].name)

    def show_target(self, name: str) -> None:
        """Show the runs on image ``name`` (the matrix is replanned on it)."""
        session = self.state.editable
        if session is not None:
            self.state.request = replace(session.request, target=name)
            self.replan()

    def apply_fix(self, fix: str) -> None:
        """Set what an error's fix names (Model settings) and, when it was set, run again."""
        if self.panel.settings.apply_fix(fix) and self.state.matrix is not None:
            self.start_runs()

    def _inspect_model(self, session: MatrixSession) -> None:
        self.questions.inspect_model(session, running=self.worker is not None)

    # running --------------------------------------------------------------------------------
    def start_runs(self, planner: Planner | None = None, listed_only: bool = False) -> None:
        """Run what the matrix (or, with ``planner``, e.g. a sweep) still lacks;
        ``listed_only``: the Runs list shows the planned runs only (a sweep's target's), its
        other runs counted (see :meth:`RunPanel.set_running`)."""
        session = self.state.editable
        if session is None:
            return
        self.panel.show_problem("")
        self._failure, self._fatal = None, False
        worker = self.worker = MatrixWorker(planner or session.runner)
        self.state.running = True
        # Only the worker of the session on show is heard: what a worker left behind by
        # another session had queued (its model's answer, its end) would be taken for news of
        # this one's.
        worker.message.connect(lambda message: self._heard(worker, self._on_message, message))
        worker.failed.connect(lambda error: self._heard(worker, self._worker_failed, error))
        worker.finished.connect(lambda: self._heard(worker, self._worker_done))
        self.panel.set_running(True, listed_only)
        worker.start()

    def _heard(self, worker: MatrixWorker, act: Callable[..., None], *args: object) -> None:
        if worker is self.worker:
            act(*args)

    def _on_message(self, message: Message) -> None:
        if isinstance(message, ModelAnswer):
            self.questions.answered(message)
            return
        self.panel.show_message(message)
        if isinstance(message, PlanReady) or not self.panel.listed_only:
            self._say_progress(message)  # a sweep's runs: said by the Test set tab
        self.heard.emit(message)
        session = self.state.matrix
        if session is not None:
            session.absorb(self.model, message)
        if isinstance(message, RunFailed) and (self._failure is None or message.fix):
            self._failure = message
        if isinstance(message, RunFailed) and message.input_error:
            # The reason stays in the window, with the control that mends it.
            self.panel.show_problem(
                f"{message.label} failed: {with_control(message.error, message.fix)}", message.fix
            )
        elif isinstance(message, ChildFatal):
            self._fatal = True
            self.panel.show_problem(with_control(message.error, message.fix), message.fix)
            request = self.state.request
            if request is not None and message.path == str(request.model):
                # The model's refusal is what an inspection would say: no child to ask again.
                self.questions.answered(message)
        elif isinstance(message, AllDone):
            self._say_the_end(message)

    def _say_the_end(self, done: AllDone) -> None:
        """At the end of the runs, why they failed, if any did, kept in view: a child's fatal
        error as it was said, else how many failed and why one did (the last that a setting
        mends, with it; else the first); where none failed, what was done, for a while."""
        panel, failure = self.panel, self._failure
        if failure is not None and done.failed and not self._fatal:
            reason = with_control(failure.error, failure.fix)
            total = done.finished + done.cached + done.failed
            said = (
                f"{failure.label} failed: {reason}"
                if done.failed == 1
                else f"{done.failed} of {total} runs failed; {failure.label}: {reason}"
            )
            panel.show_problem(said, failure.fix)
        elif panel.problem.text():  # said again, over the progress said meanwhile
            panel.show_problem(panel.problem.text(), panel.fix)
        else:
            self.notify(panel.status.text(), 8000)

    def _say_progress(self, message: Message) -> None:
        """The status bar says what is computing until the matrix is done: on a new cache the
        views stay empty for the seconds an engine child takes to start its runtime, and the
        Runs tab, where the progress bars are, may be out of sight."""
        count = self.panel.count  # show_message has counted the message already
        if isinstance(message, PlanReady) and count.to_compute:
            missing = plural(count.to_compute, "run")
            self.notify(
                f"computing {missing} (each engine process first starts its runtime: a few "
                "seconds)…",
                0,
            )
        elif isinstance(message, RunFinished | RunFailed) and count.ended < count.to_compute:
            self.notify(f"computed {count.ended} of {count.to_compute} runs…", 0)

    def _worker_failed(self, error: Exception) -> None:
        text = str(error) if isinstance(error, InputError) else f"{type(error).__name__}: {error}"
        self.say_problem(text, getattr(error, "fix", ""))
        self.worker_failed.emit(error)

    def _worker_done(self) -> None:
        self.panel.set_running(False)
        self.worker = None
        self.state.running = False
        self.questions.runs_ended()
        self.worker_finished.emit()

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()

    def cancel_and_wait(self) -> None:
        """Stop the runs in flight and leave them behind: the worker is no longer the
        session's (a worker still ending after the wait is kept until it has ended)."""
        worker = self.worker
        if worker is None:
            return
        worker.cancel()
        worker.wait(30_000)
        self.worker = None
        self.state.running = False
        self._left_behind = [w for w in self._left_behind if not w.isFinished()] + [worker]
        self.panel.set_running(False)

    # saying things --------------------------------------------------------------------------
    def say_problem(self, text: str, fix: str = "") -> None:
        """In the Runs panel, and through it in the status bar and over the views."""
        self.panel.show_problem(with_control(text, fix), fix)

    def report_unreadable(self, damaged: Sequence[InputError], outcome: str = "") -> None:
        """Runs that could not be read: said in the window (the others are shown) and, for a
        window started from a terminal, a line each on stderr (the first few, then how many
        more)."""
        if not damaged:
            return
        self.unreadable_reported = True
        for line in in_few_lines(damaged):
            print(f"segdiff-gui: {printable(f'{line}{outcome}')}", file=sys.stderr)
        more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
        self.notify(f"Unreadable: {damaged[0]}{more}{outcome}", 30000)


def imported_beside(session: MatrixSession, plan: MatrixPlan) -> list[RunRecord]:
    """The maps imported in this window that belong beside the plan's runs: of its model
    and target image, under its settings (a damaged one is left out, as the plan's are)."""
    target = plan.images[plan.target].hash
    settings = session.request.settings
    beside = []
    for key in sorted(session.imported):
        try:
            record = session.cache.read_run(key, with_map=False)
        except InputError:
            continue
        if (
            record.model_hash == plan.model_hash
            and record.target_hash == target
            and record.preprocessing == settings.preprocessing.to_dict()
            and record.output == settings.output.to_dict()
        ):
            beside.append(record)
    return beside
