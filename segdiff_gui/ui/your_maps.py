"""Your own pipeline's maps in the window: File › Import maps… stores a map file's maps as runs
marked imported and shows them beside segdiff's; Analysis › Reproduce your map… finds the
configuration that computes one bit for bit. The workflows are the runner's
(runner/imports.py, runner/reproduce.py), run off the GUI thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget
from superqt.utils import create_worker

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import Message, RunFinished, RunStarted
from segdiff_gui.core.text import printable
from segdiff_gui.io.maps import MAP_SUFFIXES, open_maps
from segdiff_gui.runner.imports import Imported, ImportRequest, import_maps
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import MatrixOutcome, follow
from segdiff_gui.runner.reproduce import ReproduceSearch, reproduce
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.plain_text import plain_message_box
from segdiff_gui.ui.session import MatrixSession
from segdiff_gui.ui.session_controller import SessionController

__all__ = ["YourMaps"]

_FILTER = f"Probability maps ({' '.join('*' + s for s in MAP_SUFFIXES)})"


class YourMaps(QObject):
    """The two actions, with the window's parts they need."""

    said = Signal(str)  # progress from the worker thread, shown in the status bar

    def __init__(
        self,
        window: QWidget,
        model: InspectionModel,
        sessions: SessionController,
        notify: Callable[[str, int], None],
    ) -> None:
        super().__init__(window)
        self.window = window
        self.model = model
        self.sessions = sessions
        self.notify = notify
        self.said.connect(lambda text: notify(text, 0))
        self._worker: Any = None

    def _session(self, what: str) -> MatrixSession | None:
        session = self.sessions.state.matrix
        if session is None:
            QMessageBox.information(
                self.window,
                what,
                "Open the model and its images first (File › Open model and images…): your "
                "maps are checked against the map the model gives.",
            )
            return None
        return session

    def _target(self, session: MatrixSession) -> Path:
        plan = session.plan
        index = plan.target if plan is not None else 0
        return session.images[index]

    # import -----------------------------------------------------------------------------------
    def import_dialog(self) -> None:
        session = self._session("Import maps")
        if session is None or self._worker is not None:
            return
        path, _ = QFileDialog.getOpenFileName(self.window, "Import your maps", "", _FILTER)
        if not path:
            return
        label, accepted = QInputDialog.getText(
            self.window, "Import maps", "Call them (shown as 'imported: …'):", text=Path(path).stem
        )
        if accepted:
            self.import_file(Path(path), label)

    def import_file(self, path: Path, label: str = "") -> None:
        """Import ``path``'s maps of the session's images in the background."""
        session = self._session("Import maps")
        if session is None:
            return
        request = session.request
        target = session.images.index(self._target(session))

        def work() -> list[Imported]:
            return import_maps(
                ImportRequest(
                    maps=path,
                    model=request.model,
                    images=request.images,
                    cache=request.cache,
                    settings=request.settings,
                    label=label,
                    target=target,
                )
            )

        self._start(work, self._imported, f"importing {printable(path.name)}…")

    def _imported(self, done: list[Imported]) -> None:
        session = self.sessions.state.matrix
        if session is not None:
            session.imported = session.imported | {item.record.key for item in done}
            self.sessions.replan()
        rounded = " (float64 rounded to float32)" if any(item.rounded for item in done) else ""
        names = ", ".join(f"{item.record.label} on {item.record.target_name}" for item in done)
        self.notify(f"Imported {names}{rounded}.", 10000)

    # reproduce --------------------------------------------------------------------------------
    def reproduce_dialog(self) -> None:
        session = self._session("Reproduce your map")
        if session is None or self._worker is not None:
            return
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Your map of the image on show", "", _FILTER
        )
        if path:
            self.reproduce_file(Path(path))

    def reproduce_file(self, path: Path) -> None:
        """Search for the configuration that computes ``path``'s map of the image on show."""
        session = self._session("Reproduce your map")
        if session is None:
            return
        request = replace(session.request, target=str(self._target(session)), repeats=1)

        def drive(runner: MatrixRunner) -> MatrixOutcome:
            return follow(runner, self._progress)

        def work() -> tuple[str, str, str]:
            search = ReproduceSearch(open_maps(path), request, printable(path.name))
            answer = reproduce(search, drive, self.said.emit)
            match = answer.match
            if match is None:
                return answer.sentence(), "Varied: " + "; ".join(answer.varied) + ".", ""
            scaling = match.candidate.scaling(request.settings.preprocessing)
            if scaling:  # a model setting, not a configuration of the matrix
                said = ", ".join(f"{name} {text}" for name, text in scaling.items())
                return (
                    answer.sentence(),
                    (
                        f"The configuration: {match.candidate.spec()}, with the model setting "
                        f"{said} (Model settings). It is in the cache."
                    ),
                    "",
                )
            spec = match.candidate.spec()
            return answer.sentence(), f"The configuration: {spec}. It is in the cache.", spec

        self._start(work, self._reproduced, f"reproducing {printable(path.name)}…")

    def _progress(self, message: Message) -> None:
        if isinstance(message, RunStarted):
            self.said.emit(f"reproducing: running {message.label}…")
        elif isinstance(message, RunFinished):
            self.said.emit(f"reproducing: {message.label} done")

    def _reproduced(self, answer: tuple[str, str, str]) -> None:
        sentence, detail, spec = answer
        said = sentence[0].upper() + sentence[1:] + "."
        self.notify(said, 0)
        box = plain_message_box(self.window, "Reproduce your map", said, detail)  # names
        if spec:
            show = box.addButton("Show it beside the others", QMessageBox.ButtonRole.AcceptRole)
            show.clicked.connect(lambda: self.add_to_matrix(spec))
        box.addButton(QMessageBox.StandardButton.Close)
        box.open()

    def add_to_matrix(self, spec: str) -> None:
        """Add the found configuration to the matrix: cached, it shows at once."""
        self.sessions.add_configs([spec])

    # the worker -------------------------------------------------------------------------------
    def _start(self, work: Callable[[], Any], done: Callable[[Any], None], busy: str) -> None:
        worker = create_worker(work, _start_thread=False)
        worker.returned.connect(done)
        worker.errored.connect(self._failed)
        worker.finished.connect(self._finished)
        self._worker = worker
        self.notify(busy, 0)
        worker.start()

    def _failed(self, error: Exception) -> None:
        text = str(error) if isinstance(error, InputError) else f"{type(error).__name__}: {error}"
        self.sessions.say_problem(text, getattr(error, "fix", ""))
        self.notify(text, 10000)

    def _finished(self) -> None:
        self._worker = None
