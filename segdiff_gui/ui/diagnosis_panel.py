"""The diagnosis, in the window: the sentences of :func:`diagnose` for what is shown, redone
when runs arrive, the reference changes or the cutoff moves (debounced while dragging)."""

from __future__ import annotations

from html import escape
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import QTextBrowser, QWidget
from superqt.utils import qdebounced, thread_worker

from segdiff_gui.core.diagnosis import Finding, by_topic, diagnose
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["DiagnosisPanel"]


# A finding's configurations to run (Finding.measure), as a link the panel handles itself.
MEASURE_SCHEME = "segdiff-measure"


def findings_html(findings: list[Finding]) -> str:
    parts = []
    for title, chosen in by_topic(findings):
        parts.append(f"<h3>{escape(title)}</h3><ul>")
        for finding in chosen:
            link = f' <a href="{escape(finding.link)}">docs</a>' if finding.link else ""
            figure = f" <i>[{escape(finding.figure)}]</i>" if finding.figure else ""
            if finding.measure:
                target = QUrl()
                target.setScheme(MEASURE_SCHEME)
                target.setPath(";".join(finding.measure))
                link += f' <a href="{escape(target.toString())}">run them</a>'
            parts.append(f"<li>{escape(finding.sentence)}{figure}{link}</li>")
        parts.append("</ul>")
    return "".join(parts)


class DiagnosisPanel(QTextBrowser):
    """Diagnoses off the GUI thread, and only while it is shown: one worker at a time, and a
    request that arrives while it runs is served once it ends (only the latest state counts)."""

    # The configurations a finding's "run them" link names (key=value specs).
    measure_requested = Signal(list)

    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setOpenLinks(False)  # documentation opens outside; "run them" is ours
        self.anchorClicked.connect(self._link_clicked)
        self.findings: list[Finding] = []
        self._worker: Any = None
        self._again = False
        self._stale = True
        for event in (model.events.loaded, model.events.reference_key, model.events.cutoff):
            event.connect(self.refresh_soon)
        self.setHtml("<p>No runs yet: the diagnosis appears as runs arrive.</p>")

    @qdebounced(timeout=150)
    def refresh_soon(self, *_: object) -> None:
        self.refresh()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._stale:
            self.refresh()

    def refresh(self) -> None:
        if not self.isVisible():
            self._stale = True  # done when the tab is opened
            return
        self._stale = False
        if self._worker is not None:
            self._again = True
            return
        study = self.model.study
        if study is None:
            self.findings = []
            self.setHtml("<p>No runs yet: the diagnosis appears as runs arrive.</p>")
            return
        worker = thread_worker(diagnose, start_thread=False)(study)
        worker.returned.connect(self._show)
        # superqt types finished as carrying None; it carries nothing
        worker.finished.connect(self._finished)  # type: ignore[arg-type]
        self._worker = worker
        worker.start()

    def _link_clicked(self, url: QUrl) -> None:
        if url.scheme() == MEASURE_SCHEME:
            self.measure_requested.emit([spec for spec in url.path().split(";") if spec])
        else:
            QDesktopServices.openUrl(url)

    def _show(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.setHtml(findings_html(findings))

    def _finished(self) -> None:
        self._worker = None
        if self._again:
            self._again = False
            self.refresh()
