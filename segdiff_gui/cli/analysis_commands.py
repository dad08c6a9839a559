"""``compare``, ``export``, ``report`` and ``check``: questions asked of cached runs (or of a
bundle, without merging it). No TensorFlow, no children: everything is in the HDF5 files."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from segdiff_gui.cli.running import err_console, open_cache, report_damaged
from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_OK
from segdiff_gui.cli.summary import (
    differences_table,
    exact_lines,
    plain_sentences,
    verdict_lines,
)
from segdiff_gui.cli.text import as_markup, say
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.study import Study
from segdiff_gui.core.tolerance import OutputTolerances
from segdiff_gui.io.html_report import write_html_report
from segdiff_gui.io.masks import write_mask
from segdiff_gui.io.reports import write_json_report
from segdiff_gui.io.tables import write_pixel_csv
from segdiff_gui.runner.reports import (
    ReportContext,
    comparison_summary,
    report_context,
    study_report,
    tolerance_summary,
)
from segdiff_gui.runner.sources import GroupStudy, RunsSource, group_studies, read_source
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_pair
from segdiff_gui.storage.studies import (
    RunStore,
    comparable_groups,
    exact_of,
    group_id,
    load_study,
    output_names,
    target_image,
)

__all__ = ["command_check", "command_compare", "command_export", "command_report"]


def runs_source(args: argparse.Namespace) -> RunsSource:
    """The runs to analyse: a bundle given with --bundle, else the cache; and every entry that
    could not be read (each command reports them, and then exits 2: it did not see them)."""
    store = BundleReader(args.bundle) if getattr(args, "bundle", None) else open_cache(args)
    return read_source(
        store,
        "run 'segdiff run' or 'segdiff demo' first",
        lambda damaged: report_damaged(err_console(), damaged),
    )


def studies_of(
    args: argparse.Namespace,
) -> tuple[RunStore, list[GroupStudy], str, list[InputError]]:
    """One study per comparable group (or just the group of --ref), with a sample record."""
    source = runs_source(args)
    studies = group_studies(source, args.cutoff, args.model, args.image, args.group, args.ref)
    return source.store, studies, source.where, source.damaged


def context_of(record: RunRecord, where: str) -> ReportContext:
    return report_context(record, where)


def command_compare(args: argparse.Namespace, out: Console, err: Console) -> int:
    _, studies, where, damaged = studies_of(args)
    status = report_damaged(err, damaged)
    if args.json:
        _json(
            [comparison_summary(study, context_of(r, where)).to_dict() for study, r, _ in studies]
        )
        return status
    for study, record, title in studies:
        exact = f" and the exact run {study.exact.label}" if study.exact else ""
        heading = as_markup(f"{title}: {_plural(len(study.runs), 'run')}{exact}")
        out.print(f"[bold]{heading}[/]", markup=True)
        if study.reference.merged_from:
            say(
                out,
                f"reference {study.reference.label} came from {study.reference.merged_from}: "
                "no run of this machine is comparable",
            )
        if not study.others:
            # One float32 run has nothing beside it, but an exact run still measures it.
            beside = "; against the exact run:" if study.exact else ": nothing to compare with"
            say(out, f"only {study.reference.label}{beside}")
            for line in exact_lines(study):
                say(out, line)
            continue
        out.print(differences_table(study, record.target_name))
        for line in plain_sentences(study) + verdict_lines(study) + exact_lines(study):
            say(out, line)
    return status


def command_export(args: argparse.Namespace, out: Console, err: Console) -> int:
    if not (args.mask or args.csv):
        raise InputError("export", "name what to write: --mask FILE and/or --csv FILE")
    store, records, _, damaged = runs_source(args)
    groups = comparable_groups(records, args.model, args.image, args.group)
    candidates = [r for group in groups for r in group]
    reference, other, group = select_pair(records, candidates, args.ref, args.other)
    # The group's exact run, where it has one: the CSV gives its value and class at each pixel.
    exact = exact_of(records, reference)
    study = load_study(store, group, args.cutoff, reference, damaged, exact)
    status = report_damaged(err, damaged)
    other_run = next(run for run in study.runs if run.key == other.key)
    flips = study.flips(other_run)
    if args.mask:
        write_mask(args.mask, flips)
        say(
            out,
            f"wrote the flip mask of {other.label} against {reference.label} at cutoff "
            f"{format_float32(args.cutoff)} ({_plural(int(flips.sum()), 'flipped pixel')}) "
            f"to {args.mask}",
        )
    if args.csv:
        count = write_pixel_csv(args.csv, study, other_run, include_at_risk=args.at_risk)
        what = "flipped or at-risk pixel" if args.at_risk else "flipped pixel"
        say(out, f"wrote {_plural(count, what)} to {args.csv}")
    return status


def command_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    if not (args.html or args.json_file):
        raise InputError("report", "name what to write: --html FILE and/or --json FILE")
    store, studies, where, damaged = studies_of(args)
    status = report_damaged(err, damaged)
    if len(studies) > 1:
        names = "; ".join(f"{title} [{group_id(r)}]" for _, r, title in studies[:6])
        raise InputError(
            "report",
            f"covers one model, image and settings; the runs here cover "
            f"{len(studies)} ({names}); choose with --ref, --model, --image or --group",
        )
    ((study, record, _),) = studies
    data = study_report(store, study, context_of(record, where))
    if args.json_file:
        write_json_report(args.json_file, data)
        say(out, f"wrote the JSON report to {args.json_file}")
    if args.html:
        image, problem = target_image(store, record.target_hash)
        status = max(status, report_damaged(err, [problem] if problem else []))
        write_html_report(args.html, data, study, image, problem is not None)
        say(out, f"wrote the HTML report to {args.html}")
    return status


def wrong_class_failures(study: Study, title: str, bound: int) -> list[str]:
    """``check --max-wrong``: a line per run (the reference's too) whose classes differ from
    the exact run's at more pixels float32 could decide than ``bound``; one line where the
    group has no exact run (a gate must not pass by not seeing)."""
    where = at_cutoff(study.cutoff, study.multiclass)
    if study.exact is None:
        return [
            f"FAIL {study.reference.label} ({title}): no exact run to count wrong classes "
            "against; run precision=float64 (the model in float64) for this image"
        ]
    failures = []
    for error in study.exact_errors.values():
        if error.decided_wrong > bound:
            notes = [
                *([f"{error.wrong_tied:,} of them tied"] if error.wrong_tied else []),
                *(
                    [f"{error.undecidable:,} more within 1 float32 ULP, not counted"]
                    if error.undecidable
                    else []
                ),
            ]
            failures.append(
                f"FAIL {error.label} ({title}): wrong classes {error.decided_wrong:,} > "
                f"{bound:,} against the exact run {study.exact.label} {where}"
                + (f" ({'; '.join(notes)})" if notes else "")
            )
    return failures


def _tolerances_of(args: argparse.Namespace, studies: list[GroupStudy]) -> OutputTolerances:
    """``--atol``, ``--rtol`` and ``--error-quantile`` as given; an output named that no
    group checked has is refused (a gate must not pass by not seeing)."""
    tolerances = OutputTolerances.of(args.atol or (), args.rtol or (), args.error_quantile or ())
    if not tolerances.named:
        return tolerances
    here = {name for _, record, _ in studies for name in output_names(record)}
    if missing := sorted(tolerances.named - here):
        outputs = ", ".join(sorted(here)) or "none named"
        raise InputError(
            "check",
            f"no run checked is of output {', '.join(missing)} (outputs here: {outputs}); "
            "give OUTPUT:X as the output's name or what --output chose",
        )
    return tolerances


def command_check(args: argparse.Namespace, out: Console, err: Console) -> int:
    bounds = {"flips": args.max_flips, "max_ulp": args.max_ulp, "max_abs": args.max_abs}
    _, studies, _, damaged = studies_of(args)
    status = report_damaged(err, damaged)
    tolerances = _tolerances_of(args, studies)
    if (
        args.max_wrong is None
        and all(bound is None for bound in bounds.values())
        and not tolerances.given
    ):
        bounds["flips"] = 0  # no bound named: any class flip fails
    # A value that is NaN where the reference has a number always fails: no bound covers it.
    bounds["nan_mismatches"] = 0
    # A gate that could not read a run must not pass by not seeing it: exit 2, and say so.
    unreadable = [f"FAIL unreadable: {entry}" for entry in damaged]
    failures, checked = [], 0
    within: list[dict[str, Any]] = []  # each run's figures under its output's tolerance
    for study, record, title in studies:
        for row in study.rows():
            checked += 1
            for name, bound in bounds.items():
                if bound is not None and row[name] > bound:
                    failures.append(
                        f"FAIL {row['label']} ({title}): "
                        f"{name.replace('_', ' ')} {row[name]:,} > {bound:,} against "
                        f"{row['reference']} {at_cutoff(study.cutoff, study.multiclass)}"
                    )
        summary = tolerance_summary(study, record, title, tolerances) if tolerances.given else None
        if summary is not None:
            within += summary.rows()
            failures += summary.failures()
        if args.max_wrong is not None:  # the reference is checked too, against the exact run
            checked += 1
            failures += wrong_class_failures(study, title, args.max_wrong)
    if checked == 0 and not damaged:
        raise InputError(
            "check",
            "found no run to compare with a reference (each model and "
            "image has a single run); run more configurations first",
        )
    if args.max_wrong is not None:
        bounds["wrong_vs_exact"] = args.max_wrong
    named = ", ".join(
        [
            f"{k.replace('_', ' ')} ≤ {v:,}"
            for k, v in bounds.items()
            if v is not None and k != "nan_mismatches"
        ]
        + ([tolerances.text()] if tolerances.given else [])
    )
    if args.json:
        _json(
            {
                "bounds": bounds,
                "tolerances": {**tolerances.to_dict(), "runs": within},
                "checked": checked,
                "failures": failures,
                "unreadable": unreadable,
            }
        )
    else:
        for line in unreadable + failures:
            say(out, line)
        verdict = "FAILED" if failures or unreadable else "OK"
        could_not = f", {len(unreadable)} could not be read" if unreadable else ""
        say(
            out,
            f"{verdict}: {_plural(checked, 'run')} checked against {named} (and no NaN where "
            f"the reference has a number); {len(failures)} over a bound{could_not}",
        )
    if status:
        return status
    return EXIT_FAILED_RUNS if failures else EXIT_OK
