"""``segdiff sweep``: a whole test set from the cache: per-image figures, Dice and IoU."""

from __future__ import annotations

import argparse

from rich.console import Console

from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_OK
from segdiff_gui.cli.parser_parts import (
    REF_HELP,
    common,
    cutoff,
    sweep_outputs,
)
from segdiff_gui.cli.running import (
    report_damaged,
)
from segdiff_gui.cli.stored_runs import runs_source
from segdiff_gui.cli.sweep_view import print_sweep, sweep_session, write_csv
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.defaults import DEFAULT_CUTOFF

DESCRIPTION = (
    "Summarise every image of one model in the cache (or a bundle): flips, at-risk pixels and "
    "max ULP per configuration against the reference configuration, and with --masks the mean "
    "Dice and IoU, their change between configurations and over repeats. Run the images first "
    "with 'segdiff run --sweep' (or --shard K/N)."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", dest="model_name", metavar="NAME", help="the model file name")
    parser.add_argument(
        "--ref",
        dest="ref_configuration",
        metavar="RUN",
        help=REF_HELP + "; the sweep compares every image with that run's configuration",
    )
    parser.add_argument(
        "--group",
        metavar="ID",
        help="the model file and settings of this group (an id 'segdiff ls' shows), on every image",
    )
    parser.add_argument("--bundle", metavar="FILE", help="read the runs from a bundle")
    parser.add_argument(
        "--cutoff",
        type=cutoff,
        default=DEFAULT_CUTOFF,
        metavar="T",
        help=f"class cutoff for sigmoid maps (default {DEFAULT_CUTOFF:g}); softmax maps use argmax",
    )
    sweep_outputs(parser)
    common(parser, "print the test-set and per-image figures as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    source = runs_source(args)
    status = report_damaged(err, source.damaged)
    summary = sweep_session(args, source.store, source.records).summarise()
    write_csv(args, out, summary)
    if args.json:
        _json(summary.to_dict())
    else:
        print_sweep(summary, out)
    # Merged shards that are not the whole set: never a pass, whatever the figures say.
    return max(status, EXIT_FAILED_RUNS if summary.incomplete else EXIT_OK)
