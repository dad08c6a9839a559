"""``segdiff compare``: every run against a reference."""

from __future__ import annotations

import argparse

from rich.console import Console

from segdiff_gui.cli.parser_parts import (
    common,
    selection,
)
from segdiff_gui.cli.running import (
    report_damaged,
)
from segdiff_gui.cli.stored_runs import context_of, studies_of
from segdiff_gui.cli.summary import (
    differences_table,
    exact_lines,
    plain_sentences,
    verdict_lines,
)
from segdiff_gui.cli.text import as_markup, say
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.runner.reports import (
    comparison_summary,
)

DESCRIPTION = (
    "For each model and image in the cache (or the one --ref belongs to), compare every run with "
    "the reference: bitwise equality, differing pixels, max ULP, max and mean |Δ|, class flips "
    "at the cutoff, determinism over repeats, at-risk pixels."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    selection(parser)
    common(parser, "print the comparisons as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
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
