"""A study for notebooks: the runs of one model on one image (one comparable group) read from
a cache or a bundle, with their maps as numpy arrays, the comparison, flips, at-risk pixels,
cutoff curve, attribution, diagnosis, test-set sweep, exports and report. Maps are read once,
on first use, bit-exactly from the store."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.api.arguments import checked_cutoff, configuration, output_path
from segdiff_gui.api.compute import compute
from segdiff_gui.api.results import Comparison, Diagnosis, Explanation, Sweep, html_document
from segdiff_gui.api.tables import Table, make_table
from segdiff_gui.core.attribution import plan_attribution
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.findings import plural
from segdiff_gui.core.study import Study as AnalysedStudy
from segdiff_gui.core.study import StudyRun
from segdiff_gui.core.sweep import SweepSummary
from segdiff_gui.io.html_report import study_fragment, write_html_report
from segdiff_gui.io.masks import write_mask
from segdiff_gui.io.reports import write_json_report
from segdiff_gui.io.tables import pixel_table, write_pixel_csv
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.runner.explain import measure_attribution
from segdiff_gui.runner.reports import report_context, study_report
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.runner.sweeps import summarise_sweep, sweep_groups, sweep_reference
from segdiff_gui.storage.records import RunRecord, is_merged
from segdiff_gui.storage.selection import select_reference
from segdiff_gui.storage.studies import (
    RunStore,
    group_id,
    load_study,
    target_image,
)

__all__ = ["Run", "Study"]


@dataclass(frozen=True)
class Run:
    """One stored run: what it is (``label``, ``configuration``, ``repeat``, ``config``), where
    it is (``key``, ``id``) and where it ran (``provenance``: device, versions, host, time)."""

    key: str
    label: str
    configuration: str
    repeat: int
    config: RunConfig
    provenance: dict[str, Any] = field(repr=False)

    @property
    def id(self) -> str:
        return self.key[:8]

    @property
    def spec(self) -> str:
        """The ``key=value`` spec that runs this configuration again."""
        return self.config.to_spec()

    @property
    def device(self) -> str:
        return str(self.provenance.get("device", ""))

    @classmethod
    def of(cls, record: RunRecord) -> Run:
        return cls(
            record.key,
            record.label,
            record.configuration,
            record.repeat,
            record.run_config,
            dict(record.provenance),
        )


RunName = str | Run  # a run's label, id prefix or key, a configuration's label, or a Run


class Study:
    """All runs of one model on one image under one set of model settings, against a
    reference run (by default this machine's batch-1 CPU run), at a cutoff.

    Made by :func:`segdiff_gui.run`, or taken from :func:`segdiff_gui.open_cache` and
    :func:`segdiff_gui.open_bundle`. Runs are named by label (``"cpu b64 r0"``), by
    configuration (``"cpu b64"``: its first repeat), by id prefix, or by a :class:`Run`.
    Every method that takes ``cutoff`` uses the study's own when it is left out.
    """

    def __init__(
        self,
        store: RunStore,
        records: Sequence[RunRecord],
        *,
        cutoff: float,
        where: str,
        title: str = "",
        reference: RunRecord | None = None,
        everything: Sequence[RunRecord] = (),
        request: MatrixRequest | None = None,
        failures: Sequence[dict[str, Any]] = (),
        progress: bool = True,
    ) -> None:
        if not records:
            raise InputError(where, "holds no run of this study")
        self._store = store
        self._records = list(records)
        self._reference = reference
        self._everything = list(everything) or self._records
        self._request = request
        self._progress = progress
        self._analysed: dict[float, AnalysedStudy] = {}
        self.cutoff = checked_cutoff(cutoff)
        self.where = where
        record = self._records[0]
        self.model = record.model_name
        self.image = record.target_name
        self.group = group_id(record)
        self.title = title or f"{self.model} on {self.image}"
        #: The runs of the matrix that failed: label, error and, where a setting mends it, fix.
        self.failures = [dict(failure) for failure in failures]
        #: The runs left out because their stored map could not be read, one line each.
        self.damaged: list[str] = []

    # -- the runs ---------------------------------------------------------------------------

    @property
    def runs(self) -> list[Run]:
        """Every run of the study, in the order people read a matrix (device, batch, knobs,
        repeat); a run whose map cannot be read is not one (see ``damaged``)."""
        self._study()  # reading the maps finds the damaged ones
        return [Run.of(record) for record in self._records]

    @property
    def reference(self) -> Run:
        analysed = self._study()
        return Run.of(self._record(analysed.reference.key))

    def with_reference(self, run: RunName) -> Study:
        """The same runs against another reference.

        Parameters
        ----------
        run : str or Run
            The new reference: a run's label or id, or a configuration (its first repeat).
        """
        chosen = self._select(run)
        return self._derived(reference=chosen)

    def at_cutoff(self, cutoff: float) -> Study:
        """The same runs with another default cutoff (between 0 and 1)."""
        study = self._derived(reference=self._reference)
        study.cutoff = checked_cutoff(cutoff)
        return study

    def runs_table(self) -> Table:
        """One row per run: id, label, configuration, repeat, device, runtime, host, time."""
        self._study()
        rows = []
        for record in self._records:
            p = record.provenance
            rows.append(
                {
                    "label": record.label,
                    "id": record.short_id,
                    "configuration": record.configuration,
                    "repeat": record.repeat,
                    "spec": record.run_config.to_spec(),
                    "device": p.get("device", ""),
                    "runtime": p.get("runtime", "tensorflow"),
                    "runtime_version": p.get("runtime_version") or p.get("tf_version", ""),
                    "host": p.get("hostname", ""),
                    "merged_from": p.get("merged_from_bundle", "") if is_merged(record) else "",
                    "timestamp": p.get("timestamp", ""),
                    "key": record.key,
                }
            )
        return make_table(rows, index="label")

    def map(self, run: RunName) -> np.ndarray:
        """A run's probability map, bit for bit as the cache stores it.

        Parameters
        ----------
        run : str or Run
            A run's label (``"cpu b64 r0"``), id prefix or key, a configuration's label
            (``"cpu b64"``: its first repeat), or a :class:`Run`.

        Returns
        -------
        numpy.ndarray
            float32, height × width (sigmoid) or height × width × classes (softmax); a copy.
        """
        return self._analysed_run(run).probabilities.copy()

    # -- at the cutoff ----------------------------------------------------------------------

    def compare(self, cutoff: float | None = None) -> Comparison:
        """Every run against the reference.

        Parameters
        ----------
        cutoff : float, optional
            The class cutoff for the flips (``p >= cutoff``); default: the study's.

        Returns
        -------
        Comparison
            Per run: bitwise equality, differing pixels, max ULP, max and mean |Δ|, where
            the largest is, class flips; the repeats' verdicts; the at-risk pixels. Its
            ``to_dict()`` is what ``segdiff compare --json`` prints for the group.
        """
        study = self._study(cutoff)
        return Comparison(study, self._context(), self.title, self._image())

    def flips(self, run: RunName | None = None, cutoff: float | None = None) -> np.ndarray:
        """Pixels whose class differs from the reference's.

        Parameters
        ----------
        run : str or Run, optional
            The run compared; default: every run (a pixel that flips in any of them).
        cutoff : float, optional
            Default: the study's. Multi-class maps flip on argmax, whatever the cutoff.

        Returns
        -------
        numpy.ndarray
            Boolean, height × width.
        """
        study = self._study(cutoff)
        if run is None:
            return study.any_flips()
        return study.flips(self._analysed_run(run, study)).copy()

    def at_risk(self, cutoff: float | None = None) -> np.ndarray:
        """Pixels that the differences seen could flip: their reference value lies closer to
        the cutoff than the largest difference any run showed (multi-class maps: their two
        likeliest classes are within twice that). Boolean, height × width."""
        return self._study(cutoff).at_risk.copy()

    def pixels(self, run: RunName, cutoff: float | None = None, at_risk: bool = False) -> Table:
        """The flipped pixels of ``run`` with every run's exact value there.

        Parameters
        ----------
        run : str or Run
            The run whose flips (against the reference) are listed.
        cutoff : float, optional
            Default: the study's.
        at_risk : bool
            Also list the at-risk pixels (``why`` says which).

        Returns
        -------
        Table
            A row per pixel and run of the study: ``row``, ``column``, ``why``, ``run``, its
            ``value`` (float32), ``exact`` (the shortest text that reads back to it),
            ``bits``, ``ulp`` (to the reference) and ``class``. ``export_pixels`` and
            ``segdiff export --csv`` write the same, a line per pixel.
        """
        study = self._study(cutoff)
        header, lines = pixel_table(study, self._analysed_run(run, study), at_risk)
        lead = len(header) - 4 * len(study.runs)  # row, column, why[, reference class]
        rows = []
        for line in lines:
            where = dict(zip(header[:lead], line[:lead], strict=True))
            for index, other in enumerate(study.runs):
                value, bits, ulp, klass = line[lead + 4 * index : lead + 4 * index + 4]
                rows.append(
                    {
                        **where,
                        "run": other.label,
                        "value": np.float32(str(value)),
                        "exact": value,
                        "bits": bits,
                        "ulp": int(str(ulp)),
                        "class": int(str(klass)),
                    }
                )
        columns = [*header[:lead], "run", "value", "exact", "bits", "ulp", "class"]
        return make_table(rows, columns=columns)

    def curve(self, run: RunName | None = None, cutoffs: Sequence[float] | None = None) -> Table:
        """Flipped pixels as a function of the cutoff (binary maps).

        Parameters
        ----------
        run : str or Run, optional
            Only this run's column; default: every run's.
        cutoffs : sequence of float, optional
            Where to count; default: 1001 cutoffs over [0, 1]. Counts are exact at any cutoff.

        Returns
        -------
        Table
            Indexed by cutoff, a column of flip counts per run.
        """
        study = self._study()
        if study.multiclass:
            raise InputError(self.title, "multi-class maps flip on argmax: no cutoff curve")
        chosen = study.others if run is None else [self._analysed_run(run, study)]
        if cutoffs is not None and not isinstance(cutoffs, Sequence | np.ndarray):
            raise InputError("cutoffs", f"is {cutoffs!r}: give a list of cutoffs")
        grid = None if cutoffs is None else np.array([checked_cutoff(c) for c in cutoffs])
        curves = {other.label: study.curve(other) for other in chosen}
        if not curves:
            raise InputError(self.title, "has only the reference: no curve to draw")
        points = next(iter(curves.values())).cutoffs if grid is None else grid
        rows = [
            {"cutoff": float(t), **{label: int(c.at(t)) for label, c in curves.items()}}
            for t in points
        ]
        return make_table(rows, index="cutoff")

    # -- why, and what it means -------------------------------------------------------------

    def diagnose(self, cutoff: float | None = None) -> Diagnosis:
        """Is it repeatable, what changes the maps, what it does at the cutoff, how to avoid
        it: the findings of ``segdiff diagnose``, each resting on a measured figure.

        Parameters
        ----------
        cutoff : float, optional
            Default: the study's.
        """
        return Diagnosis(self._study(cutoff), self._context(), self.title)

    def explain(
        self,
        first: RunName | None = None,
        second: RunName | None = None,
        cutoff: float | None = None,
    ) -> Explanation:
        """What moves one configuration to another, knob by knob (``segdiff explain``).

        Parameters
        ----------
        first, second : str or Run, optional
            Two runs of the study (default: the reference and the run that differs most),
            measured from what is cached; or two ``key=value`` specs
            (``"device=cpu,batch=1"``), whose attribution runs what is missing first (a study
            made by :func:`segdiff_gui.run`, which knows its model and images).
        cutoff : float, optional
            Default: the study's.

        Returns
        -------
        Explanation
            Each knob alone from ``first``, knob after knob towards ``second``, the total,
            and the spread over repeats, with sentences.
        """
        cutoff = self.cutoff if cutoff is None else checked_cutoff(cutoff)
        specs = [isinstance(name, str) and "=" in name for name in (first, second)]
        if any(specs):
            if not all(specs):
                raise InputError("explain", "give two key=value specs, or name two runs")
            return self._explain_specs(str(first), str(second), cutoff)
        study = self._study(cutoff)
        one = self._select(first) if first is not None else self._record(study.reference.key)
        if second is not None:
            other = self._select(second)
        elif study.others:
            worst = max(study.others, key=lambda r: _size(study, r))
            other = self._record(worst.key)
        else:
            raise InputError(self.title, "has only one run: nothing to explain")
        plan = plan_attribution(one.run_config, other.run_config)
        attribution = measure_attribution(
            self._store, self._records, plan, cutoff, (one.key, other.key)
        )
        compared = f"{one.label} ({one.short_id}) against {other.label} ({other.short_id})"
        return Explanation(attribution, self.title, compared, _measured_on(self._records))

    def _explain_specs(self, first: str, second: str, cutoff: float) -> Explanation:
        if self._request is None:
            raise InputError(
                self.where,
                "holds stored runs only: run key=value specs on a study made by "
                "segdiff_gui.run(model, images), or name two of its runs",
            )
        plan = plan_attribution(configuration(first), configuration(second))
        if not plan.steps:
            same = plan.base.label()
            raise InputError("explain", f"the two specs are one configuration ({same})")
        request = self._request.with_configs(plan.configs())
        records, outcome = compute(request, self._progress, what="attribution")
        if not records:
            raise InputError(request.model, "no run of the attribution finished")
        attribution = measure_attribution(self._store, records, plan, cutoff)
        context = _measured_on(records)
        return Explanation(attribution, self.title, "", context, failures=outcome.failed)

    def sweep(
        self,
        masks: str | Path | None = None,
        cutoff: float | None = None,
        ref: str | None = None,
    ) -> Sweep:
        """The study's configurations over the whole test set (``segdiff sweep``).

        A study made by :func:`segdiff_gui.run` first computes every image that is not
        cached yet; one opened from a cache or bundle summarises the runs stored there.

        Parameters
        ----------
        masks : str or Path, optional
            A folder of ground-truth masks named as the images (``cell_07.png``,
            ``cell_07_mask.png``): adds mean Dice and IoU and how far they move.
        cutoff : float, optional
            Default: the study's.
        ref : str, optional
            The reference configuration (default: ``cpu b1``, else the first).

        Returns
        -------
        Sweep
            Per configuration: images with flips, flips, at-risk pixels, max ULP, and with
            masks the mean Dice and IoU, their change and their range over repeats.
        """
        cutoff = self.cutoff if cutoff is None else checked_cutoff(cutoff)
        truth = TruthFolder(masks) if masks is not None else None
        records, failures = self._everything, []
        if self._request is not None:
            request = replace(self._request, sweep=True, target=None)
            if truth is not None and request.settings.preprocessing.resize == "refuse":
                truth.check_images(list(request.images))
            records, outcome = compute(request, self._progress, what="test set")
            failures = outcome.failed
        groups = sweep_groups(
            [r for r in records if r.model_hash == self._records[0].model_hash], group=self.group
        )
        if ref is not None and not isinstance(ref, str):
            raise InputError(repr(ref), "is no configuration: give its label, e.g. 'cpu b1'")
        reference = sweep_reference(groups, ref) if ref is not None else None
        damaged: list[InputError] = []
        summary: SweepSummary = summarise_sweep(
            self._store, groups, cutoff, reference, truth, damaged=damaged
        )
        return Sweep(summary, failures, [str(error) for error in damaged])

    # -- files ------------------------------------------------------------------------------

    def export_mask(self, path: str | Path, run: RunName, cutoff: float | None = None) -> Path:
        """Write the run's flip mask against the reference as an image (white: flipped; PNG
        or TIFF by the name). Returns the path."""
        target = output_path(path, "mask")
        write_mask(target, self.flips(run, cutoff))
        return target

    def export_pixels(
        self, path: str | Path, run: RunName, cutoff: float | None = None, at_risk: bool = False
    ) -> Path:
        """Write the flipped (and at-risk) pixels as CSV, a line per pixel with every run's
        exact value, bits, ULPs and class: ``segdiff export --csv``. Returns the path."""
        target = output_path(path, "table")
        study = self._study(cutoff)
        write_pixel_csv(target, study, self._analysed_run(run, study), include_at_risk=at_risk)
        return target

    def report(
        self,
        html: str | Path | None = None,
        json: str | Path | None = None,
        cutoff: float | None = None,
    ) -> list[Path]:
        """Write the report to attach to a bug report (``segdiff report``).

        Parameters
        ----------
        html, json : str or Path, optional
            A self-contained HTML file (pictures embedded, no script) and/or the JSON.
        cutoff : float, optional
            Default: the study's.

        Returns
        -------
        list of Path
            The files written, HTML first.
        """
        if html is None and json is None:
            raise InputError("report", "name what to write: html=FILE and/or json=FILE")
        study = self._study(cutoff)
        data = study_report(self._store, study, self._context())
        written = []
        if html is not None:
            page = output_path(html, "report")
            written.append(write_html_report(page, data, study, self._image()))
        if json is not None:
            written.append(write_json_report(output_path(json, "report"), data))
        return [Path(path) for path in written]

    # -- display ----------------------------------------------------------------------------

    def _repr_html_(self) -> str:
        study = self._study()
        failed = "".join(
            f"<li>failed {escape(str(f['label']))}: {escape(str(f['error']))}</li>"
            for f in self.failures
        )
        extra = f"<ul>{failed}</ul>" if failed else ""
        return html_document(study_fragment(study, self._image(), self.title) + extra)

    def __repr__(self) -> str:
        study = self._study()
        lines = [
            f"<Study {self.title}: {plural(len(self._records), 'run')} against "
            f"{study.reference.label}, cutoff {self.cutoff:g}, group {self.group}>"
        ]
        lines += Comparison(study, self._context(), self.title, None).text_lines()
        lines += [f"  failed {f['label']}: {f['error']}" for f in self.failures]
        return "\n".join(lines)

    # -- inside -----------------------------------------------------------------------------

    def _derived(self, reference: RunRecord | None) -> Study:
        study = Study(
            self._store,
            self._records,
            cutoff=self.cutoff,
            where=self.where,
            title=self.title,
            reference=reference,
            everything=self._everything,
            request=self._request,
            failures=self.failures,
            progress=self._progress,
        )
        study.damaged = list(self.damaged)
        return study

    def _study(self, cutoff: float | None = None) -> AnalysedStudy:
        """The analysis at ``cutoff``: maps read on first use; another cutoff redoes only
        what depends on it."""
        cutoff = self.cutoff if cutoff is None else checked_cutoff(cutoff)
        if cutoff not in self._analysed:
            if self._analysed:
                first = next(iter(self._analysed.values()))
                self._analysed[cutoff] = first.at_cutoff(cutoff)
            else:
                self._analysed[cutoff] = self._load(cutoff)
        return self._analysed[cutoff]

    def _load(self, cutoff: float) -> AnalysedStudy:
        """Read the maps. A run whose map is damaged (a chunk that does not inflate, a
        checksum that does not match) costs only itself: it leaves the study, named in
        ``damaged`` and in a warning, and the others are studied."""
        damaged: list[InputError] = []
        study = load_study(self._store, self._records, cutoff, self._reference, damaged)
        if damaged:
            loaded = {run.key for run in study.runs}
            if self._reference is not None and self._reference.key not in loaded:
                raise InputError(
                    self._reference.label,
                    f"is the reference, and its map cannot be read: "
                    f"{next((e for e in damaged if self._reference.key in str(e)), damaged[0])}",
                )
            for record in self._records:
                if record.key not in loaded:
                    error = next((e for e in damaged if record.key in str(e)), damaged[0])
                    self.damaged.append(f"{record.label}: {error}")
                    warnings.warn(f"left out {record.label}: {error}", stacklevel=4)
            self._records = [record for record in self._records if record.key in loaded]
        return study

    def _select(self, run: RunName) -> RunRecord:
        if isinstance(run, Run):
            if all(record.key != run.key for record in self._records):
                raise InputError(run.label, "is a run of another study")
            return self._record(run.key)
        if not isinstance(run, str):
            raise InputError(repr(run), "is no run: give a label, an id or a Run")
        if not run or not any(
            run in (r.label, r.configuration) or r.key.startswith(run.lower())
            for r in self._records
        ):
            if any(line.startswith(f"{run}: ") for line in self.damaged):
                raise InputError(run, "is left out: its stored map cannot be read (study.damaged)")
            labels = ", ".join(record.label for record in self._records[:12])
            more = ", …" if len(self._records) > 12 else ""
            raise InputError(
                run, f"names no run of this study (runs: {labels}{more}; see study.runs_table())"
            )
        return select_reference(self._records, run)

    def _record(self, key: str) -> RunRecord:
        return next(record for record in self._records if record.key == key)

    def _analysed_run(self, run: RunName, study: AnalysedStudy | None = None) -> StudyRun:
        study = study or self._study()  # first: it leaves damaged runs out of the records
        key = self._select(run).key
        return next(r for r in study.runs if r.key == key)

    def _context(self) -> dict[str, Any]:
        return report_context(self._records[0], self.where)

    def _image(self) -> np.ndarray | None:
        return target_image(self._store, self._records[0].target_hash)


def _measured_on(records: Sequence[RunRecord]) -> dict[str, Any]:
    """What ``segdiff explain --json`` adds to an attribution: model, image and runs."""
    return {
        "model": records[0].model_name,
        "image": records[0].target_name,
        "runs": {record.label: record.key for record in records},
    }


def _size(study: AnalysedStudy, run: StudyRun) -> tuple[int, int, float]:
    comparison = study.comparisons[run.key]
    return (comparison.flips, comparison.max_ulp, comparison.max_abs)
