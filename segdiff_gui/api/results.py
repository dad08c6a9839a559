"""What a study's questions return in a notebook: a comparison, a diagnosis, an explanation
and a sweep. Each holds its figures (``to_dict()``: what the matching ``segdiff`` command
prints with ``--json``; ``table`` as a DataFrame or records), renders itself in Jupyter as
self-contained HTML (no script, nothing fetched) and reads plainly in a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np

from segdiff_gui.api.tables import Table, make_table
from segdiff_gui.core.analysis import at_cutoff, flips_heading
from segdiff_gui.core.attribution import Attribution
from segdiff_gui.core.diagnosis import by_topic
from segdiff_gui.core.exact import ExactError, ExactSummary, FlipSides
from segdiff_gui.core.findings import Finding, plural
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.core.sweep import SweepHints, SweepSummary, sweep_sentences
from segdiff_gui.core.text import printable_lines
from segdiff_gui.io.html_report import study_fragment
from segdiff_gui.runner.reports import (
    ReportContext,
    ToleranceSummary,
    comparison_summary,
    diagnosis_summary,
)

__all__ = [
    "Comparison",
    "Diagnosis",
    "Exact",
    "Explanation",
    "Sweep",
    "Tolerances",
    "html_document",
    "study_html",
    "study_text",
]

# How the API asks for what a sweep did not measure.
_HOW = SweepHints(masks="masks=FOLDER", repeats="repeats=2 or more")


def html_document(body: str) -> str:
    """A fragment for a notebook cell, marked as segdiff's (nothing in it runs or loads)."""
    return f'<div class="segdiff-output">{body}</div>'


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"


def _count(value: int) -> str:
    return f"{value:,}"


class Comparison:
    """Every run of a study against its reference at a cutoff: ``rows`` (one dict per run,
    the figures of ``segdiff compare --json``), ``table``, ``verdicts`` (determinism of
    repeated configurations), ``at_risk_pixels`` and ``margin``."""

    def __init__(
        self, study: GroupAnalysis, context: ReportContext, title: str, image: np.ndarray | None
    ) -> None:
        self._study = study
        self._summary = summary = comparison_summary(study, context)
        self._title = title
        self._image = image
        self.cutoff: float = summary.cutoff
        self.reference: str = summary.reference
        self.rows: list[dict[str, Any]] = summary.comparisons
        self.verdicts: dict[str, str] = summary.determinism
        self.at_risk_pixels: int = summary.at_risk_pixels
        self.margin: float = summary.at_risk_margin
        #: Every run against the exact (float64) run, where the group has one.
        self.exact: ExactSummary | None = summary.exact

    @property
    def table(self) -> Table:
        """One row per run against the reference, indexed by the run's label."""
        return make_table(self.rows, index="label")

    def to_dict(self) -> dict[str, Any]:
        """What ``segdiff compare --json`` prints for this study's group."""
        return self._summary.to_dict()

    def text_lines(self) -> list[str]:
        rule = flips_heading(self.cutoff, self._study.multiclass)
        lines = []
        for row in self.rows:
            state = "bitwise equal" if row["bitwise_equal"] else "differs"
            nans = row["nan_mismatches"]
            lines.append(
                f"  {row['label']}: {state}, {_count(row['differing_pixels'])} differing px, "
                f"max {_count(row['max_ulp'])} ULP, max |Δ| {row['max_abs']:.3g}, "
                f"{_count(row['flips'])} {rule}"
                + (f", {plural(nans, 'value')} NaN in one map only" if nans else "")
            )
        lines += [f"  {name}: {verdict}" for name, verdict in self.verdicts.items()]
        lines.append(f"  {self._study.at_risk_sentence()}")
        if self.exact is not None:
            lines += [
                f"  vs exact {self.exact.run}: {e.label}: {e.summary()}" for e in self.exact.errors
            ]
        return lines

    def _repr_html_(self) -> str:
        return html_document(study_fragment(self._study, self._image, self._title))

    def __repr__(self) -> str:
        where = at_cutoff(self.cutoff, self._study.multiclass)
        head = f"<Comparison {self._title} against {self.reference}, {where}>"
        return printable_lines([head, *self.text_lines()])


class Exact:
    """Every run of a study against its exact (float64) run, beside the reference: ``errors``
    (each run's, the reference's first: max and mean |Δ|, ULPs from the exact value, the
    share within 1 ULP, wrong classes and how many of them float32 cannot decide),
    ``flips`` (for every run against the reference, which side of their flips is right),
    ``table`` and ``flips_table``, ``sentences``, and the exact ``map`` (float64).
    ``to_dict()`` is the ``exact`` of ``segdiff compare --json``."""

    def __init__(self, summary: ExactSummary, exact_map: np.ndarray, title: str) -> None:
        self._summary = summary
        #: The exact map: float64, as the cache stores it (a copy).
        self.map: np.ndarray = exact_map.copy()
        self._title = title
        self._where = at_cutoff(summary.cutoff, summary.multiclass)
        self.run: str = summary.run
        self.cutoff: float = summary.cutoff
        self.errors: list[ExactError] = list(summary.errors)
        self.flips: list[FlipSides] = list(summary.flips)
        self.sentences: list[str] = [e.sentence(summary.multiclass) for e in self.errors]
        self.sentences += [sides.sentence() for sides in self.flips if sides.flips]

    @property
    def table(self) -> Table:
        """One row per run (the reference first) against the exact map, by label."""
        return make_table([error.to_dict() for error in self.errors], index="label")

    @property
    def flips_table(self) -> Table:
        """One row per run against the reference: its flips and which side is right."""
        rows = [{k: v for k, v in s.to_dict().items() if k != "sentence"} for s in self.flips]
        return make_table(rows, index="second", columns=list(_FLIP_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        return self._summary.to_dict()

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape(h)}</th>" for h in ("run", "against the exact map"))
        body = "".join(
            f"<tr><td>{escape(e.label)}</td><td>{escape(e.summary())}</td></tr>"
            for e in self.errors
        )
        return html_document(
            f"<p><b>{escape(self._title)}</b> against the exact run <b>{escape(self.run)}</b>, "
            f"{escape(self._where)}</p><table><tr>{head}</tr>{body}</table>" + _list(self.sentences)
        )

    def __repr__(self) -> str:
        head = f"<Exact {self._title} against {self.run}, {self._where}>"
        return printable_lines([head, *(f"  {sentence}" for sentence in self.sentences)])


# FlipSides' fields as a table's columns (an empty table keeps its header).
_FLIP_COLUMNS = (
    "first",
    "second",
    "cutoff",
    "multiclass",
    "flips",
    "first_right",
    "second_right",
    "neither_right",
    "undecidable",
    "ulp",
)


class Tolerances:
    """Every run of a study against its reference under Polygraphy's tolerances
    (core/tolerance.py): ``passed``; ``checks`` (per run: how many values exceed ``atol``
    and ``rtol``, the largest |Δ| and relative error, the quantiles where one was asked
    for); ``failures`` (``segdiff check``'s lines); ``table``. ``to_dict()`` gives the runs
    as ``segdiff check --json`` does (its ``tolerances.runs``)."""

    def __init__(self, summary: ToleranceSummary) -> None:
        self._summary = summary
        self.checks = list(summary.checks)
        self.passed: bool = summary.passed
        self.failures: list[str] = summary.failures()

    @property
    def table(self) -> Table:
        """One row per run against the reference, by label."""
        return make_table(self._summary.rows(), index="label")

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "runs": self._summary.rows(), "failures": self.failures}

    def _head(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        tolerance = self.checks[0].tolerance.text() if self.checks else "no run to check"
        return f"{self._summary.title}: {verdict} under {tolerance}"

    def _repr_html_(self) -> str:
        head = "".join(
            f"<th>{escape(h)}</th>" for h in ("run", "values beyond", "max |Δ|", "max |Δ|/|ref|")
        )
        body = "".join(
            f"<tr><td>{escape(c.label)}</td><td>{c.exceeding:,} of {c.values:,}</td>"
            f"<td>{c.max_abs!r}</td><td>{c.max_rel!r}</td></tr>"
            for c in self.checks
        )
        return html_document(
            f"<p><b>{escape(self._head())}</b></p><table><tr>{head}</tr>{body}</table>"
            + (_list(self.failures) if self.failures else "")
        )

    def __repr__(self) -> str:
        return "\n".join([f"<Tolerances {self._head()}>", *(f"  {f}" for f in self.failures)])


class Diagnosis:
    """The findings about a study, by the question they answer: is it repeatable, what
    changes the maps, what it does at the cutoff, how to avoid it (``segdiff diagnose``)."""

    def __init__(self, study: GroupAnalysis, context: ReportContext, title: str) -> None:
        self._summary = summary = diagnosis_summary(study, context)
        self._title = title
        self._where = at_cutoff(study.cutoff, study.multiclass)
        self.findings: list[Finding] = list(summary.findings)
        self.reference: str = summary.reference
        self.cutoff: float = summary.cutoff

    def topics(self) -> list[tuple[str, list[str]]]:
        """(the question, its sentences) for every question with findings, in order."""
        grouped = by_topic(self.findings)
        return [(heading, [finding.sentence for finding in found]) for heading, found in grouped]

    @property
    def table(self) -> Table:
        return make_table([finding.to_dict() for finding in self.findings])

    def to_dict(self) -> dict[str, Any]:
        """What ``segdiff diagnose --json`` prints for this study's group."""
        return self._summary.to_dict()

    def _repr_html_(self) -> str:
        parts = [
            f"<p><b>{escape(self._title)}</b>, against <b>{escape(self.reference)}</b>, "
            f"{escape(self._where)}</p>"
        ]
        for heading, found in by_topic(self.findings):
            items = "".join(
                f"<li>{escape(f.sentence)}"
                + (f' (<a href="{escape(f.link)}">docs</a>)' if f.link else "")
                + "</li>"
                for f in found
            )
            parts.append(f"<p><b>{escape(heading)}</b></p><ul>{items}</ul>")
        return html_document("".join(parts))

    def __repr__(self) -> str:
        lines = [f"<Diagnosis {self._title} against {self.reference}, {self._where}>"]
        for heading, sentences in self.topics():
            lines.append(heading)
            lines += [f"  • {sentence}" for sentence in sentences]
        return printable_lines(lines)


class Explanation:
    """What moves one configuration to another: each knob alone from the first, knob after
    knob towards the second, the total, and the spread over repeats (``segdiff explain``)."""

    def __init__(
        self,
        attribution: Attribution,
        title: str,
        compared: str,
        context: dict[str, Any],
        failures: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.attribution = attribution
        self._context = context
        self._title = title
        self._compared = compared
        self._where = at_cutoff(attribution.cutoff, attribution.multiclass)
        #: The attribution's runs that failed (label, error): why a step is not measured.
        self.failures = [dict(failure) for failure in failures]
        self.sentences: list[str] = attribution.sentences(bool(self.failures))
        self.sentences += [f"Failed {f['label']}: {f['error']}" for f in self.failures]

    @property
    def table(self) -> Table:
        """One row per step: kind (alone, cumulative, total, repeats), knob, change, the two
        configurations compared, and the effect (ULPs, |Δ|, differing pixels, flips)."""
        return make_table(self.to_dict()["rows"])

    def to_dict(self) -> dict[str, Any]:
        """What ``segdiff explain --json`` prints: the attribution, the model, the image and
        the runs it was measured on (label → key)."""
        return {**self.attribution.to_dict(), **self._context}

    def _rows(self) -> list[list[str]]:
        rows = []
        for row in self.attribution.rows:
            effect = row.effect.cells() if row.effect else ["not measured", "", "", "", ""]
            rows.append([row.kind, row.knob, row.change, f"{row.compared[0]} → {row.compared[1]}"])
            rows[-1] += effect
        return rows

    def _repr_html_(self) -> str:
        flips = flips_heading(self.attribution.cutoff, self.attribution.multiclass)
        header = ["step", "knob", "change", "compared", "max ULP", "max |Δ|", "differing px"]
        header += [flips, "at risk"]
        head = "".join(f"<th>{escape(h)}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
            for row in self._rows()
        )
        plan = self.attribution.plan
        base, target = escape(plan.base.label()), escape(plan.target.label())
        lead = f"What moves <b>{base}</b> to <b>{target}</b>"
        lead += f" ({escape(self._compared)})" if self._compared else ""
        lead += f", {escape(self._where)}"
        return html_document(
            f"<p><b>{escape(self._title)}</b>: {lead}</p><table><tr>{head}</tr>{body}</table>"
            + _list(self.sentences)
        )

    def __repr__(self) -> str:
        plan = self.attribution.plan
        head = f"{self._title}: {plan.base.label()} → {plan.target.label()}, {self._where}"
        lines = [f"<Explanation {head}>"]
        names = ("max ULP", "max |Δ|", "differing px", "flips", "at risk")
        for row in self._rows():
            step, knob, change, compared, *figures = row
            measured = figures[0] != "not measured"
            shown = ", ".join(f"{n} {f}" for n, f in zip(names, figures, strict=True))
            lines.append(
                f"  {step:<10} {knob:<12} {change:<22} {compared}: "
                + (shown if measured else "not measured")
            )
        lines += [f"  {sentence}" for sentence in self.sentences]
        return printable_lines(lines)


class Sweep:
    """A test set: per configuration the images with flips, the flips, at-risk pixels and max
    ULP over every image, and with ground truth the mean Dice and IoU and how far they move
    (``segdiff sweep``); ``images`` has one row per image and configuration."""

    def __init__(
        self,
        summary: SweepSummary,
        failures: Sequence[dict[str, Any]] = (),
        damaged: Sequence[str] = (),
    ) -> None:
        self.summary = summary
        #: The runs of the sweep that failed (label · image, error): images left out.
        self.failures = [dict(failure) for failure in failures]
        #: The runs left out because their stored map could not be read, one line each.
        self.damaged = list(damaged)
        self.sentences: list[str] = sweep_sentences(summary, _HOW)
        #: The merged test sets whose shards or images are missing (empty: none known to be).
        self.incomplete = summary.incomplete
        if self.damaged:
            self.sentences.append(
                f"{plural(len(self.damaged), 'stored run')} could not be read and "
                f"{'is' if len(self.damaged) == 1 else 'are'} left out: {self.damaged[0]}"
                + (f" (and {len(self.damaged) - 1} more)" if len(self.damaged) > 1 else "")
            )
        if self.failures:
            shown = "; ".join(f"{f['label']}: {f['error']}" for f in self.failures[:5])
            more = f"; and {len(self.failures) - 5} more" if len(self.failures) > 5 else ""
            self.sentences.append(
                f"{plural(len(self.failures), 'run')} failed, so their images are left out "
                f"of their configuration ({shown}{more})."
            )

    @property
    def table(self) -> Table:
        return make_table(self.summary.rows(), index="configuration")

    @property
    def images(self) -> Table:
        rows = [
            {"image": image.image, "configuration": name, **entry.effect.to_dict()}
            for image in self.summary.images
            for name, entry in image.configurations.items()
        ]
        return make_table(rows)

    def to_dict(self) -> dict[str, Any]:
        """What ``segdiff sweep --json`` prints."""
        return self.summary.to_dict()

    def _cells(self, row: dict[str, Any]) -> list[str]:
        cells = [
            row["configuration"] + (" (reference)" if row["is_reference"] else ""),
            _count(row["images"]),
            _count(row["images_with_flips"]),
            _count(row["flips"]),
            _count(row["at_risk"]),
            _count(row["max_ulp"]),
        ]
        if self.summary.has_truth:
            dice = row["mean_dice"]
            cells += ["" if dice is None else f"{dice:.6f}", self.summary.delta_text(row)]
        return cells

    def _header(self) -> list[str]:
        header = ["configuration", "images", "with flips", "flips", "at risk", "max ULP"]
        return header + (["mean Dice", "Δ Dice"] if self.summary.has_truth else [])

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape(h)}</th>" for h in self._header())
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in self._cells(row)) + "</tr>"
            for row in self.summary.rows()
        )
        rule = at_cutoff(self.summary.cutoff, self.summary.multiclass)
        lead = (
            f"<p><b>Test set</b>: {escape(self.summary.images_text())} of "
            f"{escape(self.summary.model)} against {escape(self.summary.reference)}, {rule}</p>"
        )
        return html_document(f"{lead}<table><tr>{head}</tr>{body}</table>" + _list(self.sentences))

    def __repr__(self) -> str:
        lines = [
            f"<Sweep {self.summary.model}: {self.summary.images_text()} against "
            f"{self.summary.reference}, {at_cutoff(self.summary.cutoff, self.summary.multiclass)}>"
        ]
        header = self._header()
        for row in self.summary.rows():
            cells = self._cells(row)
            figures = zip(header[1:], cells[1:], strict=True)
            lines.append(f"  {cells[0]}: " + ", ".join(f"{h} {c}" for h, c in figures if c))
        lines += [f"  {sentence}" for sentence in self.sentences]
        return printable_lines(lines)


def study_html(
    study: GroupAnalysis, image: np.ndarray | None, title: str, failures: Sequence[dict[str, Any]]
) -> str:
    """A notebook study as a page: its comparison and pictures, then the runs that failed."""
    failed = "".join(
        f"<li>failed {escape(str(f['label']))}: {escape(str(f['error']))}</li>" for f in failures
    )
    extra = f"<ul>{failed}</ul>" if failed else ""
    return html_document(study_fragment(study, image, title) + extra)


def study_text(
    head: str,
    study: GroupAnalysis,
    context: ReportContext,
    title: str,
    failures: Sequence[dict[str, Any]],
) -> str:
    """A notebook study as text: ``head``, its comparison, then the runs that failed."""
    lines = [head, *Comparison(study, context, title, None).text_lines()]
    lines += [f"  failed {f['label']}: {f['error']}" for f in failures]
    return printable_lines(lines)
