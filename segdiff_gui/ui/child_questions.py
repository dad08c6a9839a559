"""What the window asks TensorFlow children in the background: which devices they see (the
matrix editor offers them) and what a model takes and gives (the Runs panel says it). Each
answer arrives on the GUI thread, and an inspection's is shown only while the request it
answered is still the one on show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from superqt.utils import create_worker

from segdiff_gui.core.protocol import ChildFatal, ModelAnswer
from segdiff_gui.runner.devices import gpu_names, inspect_model, probe_devices
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.ui.hints import with_control
from segdiff_gui.ui.run_panel import RunPanel
from segdiff_gui.ui.session import MatrixSession
from segdiff_gui.ui.session_model import SessionModel

__all__ = ["ChildQuestions"]


class ChildQuestions:
    """Device probes and model inspections for the session on show (``state``). While runs
    compute, their child answers for the model (:meth:`answered`); what it did not say is
    asked once they are done (:meth:`runs_ended`)."""

    def __init__(
        self,
        panel: RunPanel,
        cache: ResultCache,
        notify: Callable[[str, int], None],
        state: SessionModel,
    ) -> None:
        self.panel, self.cache, self.notify, self.state = panel, cache, notify, state
        self._workers: list[Any] = []  # kept alive while they run
        self._after_runs = False  # an inspection waits for the runs in flight

    def _in_background(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        worker = create_worker(work, *args, _start_thread=False, **kwargs)
        self._workers = [w for w in self._workers if w.is_running] + [worker]
        return worker

    def probe_devices(self) -> None:
        """Ask a TensorFlow child which devices it sees; the matrix editor offers them."""
        self.notify("probing devices (TensorFlow in a child)…", 0)
        worker = self._in_background(probe_devices, self.cache.root, fresh=True)
        worker.returned.connect(self._devices_probed)
        worker.errored.connect(lambda error: self.notify(str(error), 10000))
        worker.start()

    def _devices_probed(self, probe: dict[str, Any]) -> None:
        names = ["cpu", *gpu_names(probe)]
        editor = self.panel.editor
        chosen = [name for name, box in editor.devices.items() if box.isChecked()]
        editor.set_devices(names, chosen)
        self.notify(f"devices TensorFlow sees: {', '.join(names)}", 10000)

    def forget(self) -> None:
        """Another session is on show: nothing waits for its runs."""
        self._after_runs = False

    def inspect_model(self, session: MatrixSession, running: bool) -> None:
        """Ask a child what the model takes and gives (unless this model file was asked about
        before); ``running``: runs are computing, whose child will say it, so the question
        waits for them."""
        if session is not self.state.session:
            return
        if running:
            self._after_runs = True
            self.panel.show_model_pending()
            return
        self.panel.model_info.setText("inspecting the model (TensorFlow in a child)…")
        request = session.request
        model_hash = session.plan.model_hash if session.plan else None
        worker = self._in_background(
            inspect_model,
            request.model,
            request.settings.trust_model,
            state_dir=request.cache.root,
            model_hash=model_hash,
        )
        asked = (session, request.model, request.settings.trust_model)
        worker.returned.connect(lambda answer: self._inspected(answer, asked))
        worker.errored.connect(lambda error: self.panel.model_info.setText(str(error)))
        worker.start()

    def answered(self, answer: ModelAnswer | ChildFatal) -> None:
        """A run's child said what the model is (or refused it): no inspection needed."""
        self._after_runs = False
        self._inspected(answer)

    def runs_ended(self) -> None:
        session = self.state.matrix
        if self._after_runs and session is not None:
            self._after_runs = False
            self.inspect_model(session, running=False)  # no child of the runs said it

    def _inspected(
        self, answer: ModelAnswer | ChildFatal, asked: tuple[object, ...] | None = None
    ) -> None:
        """Show what an inspection said, unless it answered a request that has changed since
        (another model, or trust given while a refusal was on its way): a stale refusal would
        stand in the window over runs that succeeded."""
        session = self.state.matrix
        if asked is not None and (
            session is None
            or asked != (session, session.request.model, session.request.settings.trust_model)
        ):
            return
        self.panel.show_model(answer)
        if isinstance(answer, ChildFatal):
            self.panel.show_problem(with_control(answer.error, answer.fix), answer.fix)
        else:
            self.panel.settings.set_outputs([output["name"] for output in answer.outputs])
