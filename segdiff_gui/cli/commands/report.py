"""``segdiff report``: a self-contained HTML and/or JSON report of one group."""

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
from segdiff_gui.cli.text import say
from segdiff_gui.core.errors import InputError
from segdiff_gui.io.html_report import write_html_report
from segdiff_gui.io.reports import write_json_report
from segdiff_gui.runner.reports import (
    study_report,
)
from segdiff_gui.storage.studies import (
    group_id,
    target_image,
)

DESCRIPTION = (
    "Write one HTML file (tables, pictures, flips-vs-cutoff curve, provenance, all embedded) "
    "and/or the same data as JSON, for one model and image."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    selection(parser)
    parser.add_argument("--html", metavar="FILE", help="the HTML report to write")
    parser.add_argument("--json", dest="json_file", metavar="FILE", help="the JSON report")
    common(parser)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
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
