"""The File menu's exports: the flip mask, the flipped pixels as CSV, the report (HTML or
JSON) and a picture of the views. Each asks for a file name and writes what the inspection
model shows; the report is the same one ``segdiff report`` writes."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from segdiff_gui.io.reports import write_json_report
from segdiff_gui.io.tables import write_pixel_csv
from segdiff_gui.runner.reports import report_context, study_report
from segdiff_gui.storage.studies import RunStore
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["ExportActions"]


class ExportActions:
    def __init__(
        self,
        parent: QWidget,
        model: InspectionModel,
        views: QWidget,
        store: Callable[[], RunStore | None],
        notify: Callable[[str, int], None],
    ) -> None:
        self.parent = parent
        self.model = model
        self.views = views
        self.store = store
        self.notify = notify

    def _save_path(self, title: str, default: str, filters: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self.parent, title, default, filters)
        return path

    def export_mask(self) -> None:
        study = self.model.study
        if study is None or not study.others:
            QMessageBox.information(self.parent, "Export flip mask", "There is no run to compare.")
            return
        path = self._save_path(
            "Export flip mask", "flips.png", "Images (*.png *.tif);;NumPy (*.npy)"
        )
        if path:
            from segdiff_gui.io.masks import write_mask  # tifffile: not for the window's start

            write_mask(path, study.any_flips())
            self.notify(f"wrote {path}", 6000)

    def export_csv(self) -> None:
        study, other = self.model.study, self.model.focus_run
        if study is None or other is None:
            QMessageBox.information(self.parent, "Export CSV", "There is no run to compare.")
            return
        path = self._save_path("Export flipped pixels", "flips.csv", "CSV (*.csv)")
        if path:
            count = write_pixel_csv(path, study, other, include_at_risk=self.model.at_risk)
            self.notify(
                f"wrote {count:,} pixels of {other.label} vs {study.reference.label} to {path}",
                8000,
            )

    def export_report(self) -> None:
        study, store = self.model.study, self.store()
        if study is None or store is None:
            return
        path = self._save_path(
            "Export report", "segdiff-report.html", "HTML (*.html);;JSON (*.json)"
        )
        if not path:
            return
        context = report_context(self.model.records[study.reference.key])
        data = study_report(store, study, context)
        if path.lower().endswith(".json"):
            write_json_report(path, data)
        else:
            from segdiff_gui.io.html_report import write_html_report  # not for the start either

            unreadable = self.model.image_problem is not None
            write_html_report(path, data, study, self.model.image, unreadable)
        self.notify(f"wrote {path}", 6000)

    def export_views(self) -> None:
        path = self._save_path("Export the views", "segdiff-views.png", "PNG (*.png)")
        if path:
            self.views.grab().save(path)
            self.notify(f"wrote {path}", 6000)
