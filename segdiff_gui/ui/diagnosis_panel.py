"""The diagnosis, in the window: the sentences of :func:`diagnose` for what is shown, redone
when runs arrive, the reference changes or the cutoff moves (debounced while dragging)."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QTextBrowser, QWidget
from superqt.utils import qdebounced

from segdiff_gui.core.diagnosis import Finding, by_topic, diagnose
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["DiagnosisPanel"]


def findings_html(findings: list[Finding]) -> str:
    parts = []
    for title, chosen in by_topic(findings):
        parts.append(f"<h3>{escape(title)}</h3><ul>")
        for finding in chosen:
            link = f' <a href="{escape(finding.link)}">docs</a>' if finding.link else ""
            figure = f" <i>[{escape(finding.figure)}]</i>" if finding.figure else ""
            parts.append(f"<li>{escape(finding.sentence)}{figure}{link}</li>")
        parts.append("</ul>")
    return "".join(parts)


class DiagnosisPanel(QTextBrowser):
    def __init__(self, model: InspectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setOpenExternalLinks(True)
        self.findings: list[Finding] = []
        model.runs_changed.connect(self.refresh_soon)
        model.reference_changed.connect(self.refresh_soon)
        model.cutoff_changed.connect(self.refresh_soon)
        self.refresh()

    @qdebounced(timeout=150)
    def refresh_soon(self, *_: object) -> None:
        self.refresh()

    def refresh(self) -> None:
        study = self.model.study
        if study is None:
            self.findings = []
            self.setHtml("<p>No runs yet: the diagnosis appears as runs arrive.</p>")
            return
        self.findings = diagnose(study)
        self.setHtml(findings_html(self.findings))
