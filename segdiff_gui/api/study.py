"""A study for notebooks: the runs of one model on one image (one comparable group) read from
a cache or a bundle, with their maps as numpy arrays, the comparison, flips, at-risk pixels,
cutoff curve, attribution, diagnosis, test-set sweep, exports and report. Maps are read once,
on first use, bit-exactly from the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.api.arguments import ConfigLike, checked_cutoff, per_output
from segdiff_gui.api.files import write_flip_mask, write_flipped_pixels, write_study_report
from segdiff_gui.api.pipeline import Reproduced, reproduce_in
from segdiff_gui.api.recompute import explanation_of_runs, explanation_of_specs, test_set
from segdiff_gui.api.results import (
    Comparison,
    Diagnosis,
    Exact,
    Explanation,
    Sweep,
    Tolerances,
    study_html,
    study_text,
)
from segdiff_gui.api.stored import Run, RunName, StoredGroup
from segdiff_gui.api.tables import Table, flip_curve_table, make_table, pixel_rows
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.findings import plural
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.core.tolerance import OutputTolerances
from segdiff_gui.io.tables import pixel_table
from segdiff_gui.runner.reports import ReportContext, report_context, tolerance_summary
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.loading import ChosenGroup
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore, group_id, output_names

__all__ = ["Run", "Study"]  # Run: api/stored.py


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
        chosen: ChosenGroup,
        *,
        cutoff: float,
        where: str,
        everything: Sequence[RunRecord] = (),
        request: MatrixRequest | None = None,
        failures: Sequence[dict[str, Any]] = (),
        progress: bool = True,
    ) -> None:
        records = chosen.records
        if not records:
            raise InputError(where, "holds no run of this study")
        self._everything = list(everything) or list(records)
        self._group = StoredGroup(store, records, chosen.reference, chosen.exact)
        # The analysis of the group by cutoff, its maps read once: shared with the studies
        # at another cutoff made from this one.
        self._analysed: dict[float, GroupAnalysis] = {}
        self._request = request
        self._progress = progress
        self.cutoff = checked_cutoff(cutoff)
        self.where = where
        record = records[0]
        self.model = record.study_model_name
        self.image = record.target_name
        self.group = group_id(record)
        self.title = chosen.title or f"{self.model} on {self.image}"
        #: The runs of the matrix that failed: label, error and, where a setting mends it, fix.
        self.failures = [dict(failure) for failure in failures]

    @property
    def damaged(self) -> list[str]:
        """The runs left out because their stored map could not be read, one line each."""
        return self._group.damaged

    # -- the runs ---------------------------------------------------------------------------

    @property
    def runs(self) -> list[Run]:
        """Every run of the study, in the order people read a matrix (device, batch, knobs,
        repeat); a run whose map cannot be read is not one (see ``damaged``)."""
        self._study()  # reading the maps finds the damaged ones
        return self._group.runs()

    @property
    def reference(self) -> Run:
        analysed = self._study()
        return Run.of(self._group.record(analysed.reference.key))

    def with_reference(self, run: RunName) -> Study:
        """The same runs against another reference.

        Parameters
        ----------
        run : str or Run
            The new reference: a run's label or id, or a configuration (its first repeat).
        """
        reference = self._group.select(run)
        study = self._derived(self._group.with_reference(reference), {})
        if self._analysed:  # the maps already read are not read again
            cutoff, analysed = next(iter(self._analysed.items()))
            chosen = self._group.analysed_run(reference.key, analysed)
            study._analysed[cutoff] = GroupAnalysis(
                analysed.runs, cutoff, chosen, exact=analysed.exact
            )
        return study

    def at_cutoff(self, cutoff: float) -> Study:
        """The same runs with another default cutoff (between 0 and 1)."""
        study = self._derived(self._group, self._analysed)  # the same maps, read once
        study.cutoff = checked_cutoff(cutoff)
        return study

    def runs_table(self) -> Table:
        """One row per run: id, label, configuration, repeat, device, runtime, host, time."""
        self._study()
        rows = self._group.rows()
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
        return Comparison(study, self._context(), self.title, self._group.image)

    def exact(self, cutoff: float | None = None) -> Exact:
        """Every run against the exact run (the model in float64, ``precision=float64``),
        beside the reference, never in its place.

        Parameters
        ----------
        cutoff : float, optional
            The class cutoff for wrong classes and flips; default: the study's.

        Returns
        -------
        Exact
            Per run (``table``): max and mean |Δ| from the exact map, the most float32
            steps from the exact value rounded to float32, the share of pixels within 1 such
            step, wrong classes and how many of them lie within 1 float32 ULP of the cutoff
            (float32 cannot decide them); per run against the reference (``flips_table``):
            which side of each flip is right; ``sentences`` say both.
        """
        study = self._study(cutoff)
        summary = study.exact_summary()
        if summary is None:
            raise InputError(
                self.title,
                "has no exact run: run the model with precision=float64 (the model in "
                "float64) on this image, beside the others",
            )
        assert study.exact is not None  # a summary is made of it
        return Exact(summary, study.exact.probabilities, self.title)

    def tolerance(
        self,
        atol: float | Mapping[str, float] | None = None,
        rtol: float | Mapping[str, float] | None = None,
        error_quantile: float | Mapping[str, float] | None = None,
    ) -> Tolerances:
        """Every run against the reference under Polygraphy's tolerances: ``segdiff check
        --atol --rtol --error-quantile``.

        Parameters
        ----------
        atol, rtol : float or dict, optional
            A value fails where ``|Δ| > atol`` and ``|Δ|/|reference| > rtol`` (Polygraphy's
            elementwise check); not given: 0. As Polygraphy's API, each may be a mapping of
            an output's name (or what ``output`` chose) to its tolerance, ``""`` for every
            other output: a study is one output's.
        error_quantile : float or dict, optional
            Check the quantile (0 to 1) of |Δ| against ``atol`` and of the relative error
            against ``rtol`` instead of every value (Polygraphy's ``--check-error-stat
            quantile``).

        Returns
        -------
        Tolerances
            ``passed``, each run's figures (``table``, ``checks``) and ``failures``.
        """
        tolerances = OutputTolerances(
            per_output(atol, "atol"),
            per_output(rtol, "rtol"),
            per_output(error_quantile, "error_quantile", quantile=True),
        )
        record = self._records[0]
        summary = tolerance_summary(self._study(), record, self.title, tolerances)
        if summary is None:
            names = ", ".join(output_names(record)) or "its only output"
            raise InputError(
                self.title,
                f"no tolerance given for its output ({names}): give atol, rtol or "
                'error_quantile as a number, or with "" for every output',
            )
        return Tolerances(summary)

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
            A row per pixel and run of the study: ``row``, ``column``, ``why``; where the
            group has an exact run (the model in float64), its value there (``exact value
            (float64)``; multi-class: ``exact p(reference class) (float64)``), its ``exact
            class`` and whether ``float32 can decide`` it; then ``run``, its ``value``
            (float32), ``exact`` (the shortest text that reads back to it), ``bits``, ``ulp``
            (to the reference) and ``class``. ``export_pixels`` and ``segdiff export --csv``
            write the same, a line per pixel.
        """
        study = self._study(cutoff)
        header, lines = pixel_table(study, self._analysed_run(run, study), at_risk)
        rows, columns = pixel_rows(header, lines, [r.label for r in study.runs])
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
        return flip_curve_table(study, chosen, cutoffs, self.title)

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
        if not any(specs):
            return explanation_of_runs(self._group, self._study(cutoff), first, second, self.title)
        if not all(specs):
            raise InputError("explain", "give two key=value specs, or name two runs")
        pair = (str(first), str(second))
        return explanation_of_specs(
            self._request, self._store, pair, cutoff=cutoff, progress=self._progress,
            where=self.where, title=self.title,
        )  # fmt: skip

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
        return test_set(
            self._store, self._everything, group=self.group, request=self._request,
            masks=masks, cutoff=cutoff, ref=ref, progress=self._progress,
        )  # fmt: skip

    def reproduce(self, user_map: object, config: ConfigLike | None = None) -> Reproduced:
        """Which configuration computes ``user_map`` (your own pipeline's map of this
        study's image, an array) bit for bit: the defaults, then one knob at a time (oneDNN,
        ``model.predict``'s batch, XLA, threads, dividing or multiplying by 255), then pairs,
        each run with this study's model, images and settings and cached.

        Returns
        -------
        Reproduced
            ``.sentence`` answers; ``.run_arguments`` runs the match again; ``.table`` lists
            every configuration tried. A study opened from a cache or a bundle has no model
            and images to run: use :func:`segdiff_gui.reproduce`.
        """
        if self._request is None:
            raise InputError(
                self.where,
                "holds stored runs only: call segdiff_gui.reproduce(map, model, images), or "
                "reproduce on a study made by segdiff_gui.run",
            )
        return reproduce_in(self._request, user_map, self._progress, config)

    # -- files ------------------------------------------------------------------------------

    def export_mask(self, path: str | Path, run: RunName, cutoff: float | None = None) -> Path:
        """Write the run's flip mask against the reference as an image (white: flipped; PNG
        or TIFF by the name). Returns the path."""
        return write_flip_mask(path, self.flips(run, cutoff))

    def export_pixels(
        self, path: str | Path, run: RunName, cutoff: float | None = None, at_risk: bool = False
    ) -> Path:
        """Write the flipped (and at-risk) pixels as CSV, a line per pixel with every run's
        exact value, bits, ULPs and class, and the exact run's value and class where the
        group has one: ``segdiff export --csv``. Returns the path."""
        study = self._study(cutoff)
        return write_flipped_pixels(path, study, self._analysed_run(run, study), at_risk)

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
        study = self._study(cutoff)
        group = self._group
        return write_study_report(
            self._store, study, self._context(), image=group.image, html=html, json=json,
            image_unreadable=group.image_unreadable,
        )  # fmt: skip

    # -- display ----------------------------------------------------------------------------

    def _repr_html_(self) -> str:
        return study_html(self._study(), self._group.image, self.title, self.failures)

    def __repr__(self) -> str:
        head = f"<Study {self.title}: {plural(len(self._records), 'run')} against "
        study = self._study()
        head += (
            f"{study.reference.label}, cutoff {format_float32(self.cutoff)}, group {self.group}>"
        )
        return study_text(head, study, self._context(), self.title, self.failures)

    # -- inside -----------------------------------------------------------------------------

    def _derived(self, group: StoredGroup, analysed: dict[float, GroupAnalysis]) -> Study:
        study = Study(
            group.store,
            ChosenGroup(group.records, group.reference, group.exact, self.title),
            cutoff=self.cutoff,
            where=self.where,
            everything=self._everything,
            request=self._request,
            failures=self.failures,
            progress=self._progress,
        )
        study._group, study._analysed = group, analysed
        return study

    def _study(self, cutoff: float | None = None) -> GroupAnalysis:
        """The analysis at ``cutoff``: maps read on first use; another cutoff redoes only what
        depends on it."""
        cutoff = self.cutoff if cutoff is None else checked_cutoff(cutoff)
        if cutoff not in self._analysed:
            if self._analysed:
                first = next(iter(self._analysed.values()))
                self._analysed[cutoff] = first.at_cutoff(cutoff)
            else:
                self._analysed[cutoff] = self._group.load(cutoff)
        return self._analysed[cutoff]

    def _select(self, run: RunName) -> RunRecord:
        return self._group.select(run)

    def _analysed_run(self, run: RunName, study: GroupAnalysis | None = None) -> StudyRun:
        # The analysis first: reading the maps leaves the damaged runs out of the records.
        return self._group.analysed_run(run, study or self._study())

    @property
    def _records(self) -> list[RunRecord]:
        return self._group.records

    @property
    def _store(self) -> RunStore:
        return self._group.store

    def _context(self) -> ReportContext:
        return report_context(self._records[0], self.where)
