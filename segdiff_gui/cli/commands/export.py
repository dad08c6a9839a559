"""``segdiff export``: the flip mask and the flipped pixels of two runs."""

from __future__ import annotations

import argparse

from rich.console import Console

from segdiff_gui.cli.parser_parts import (
    RUN_NAME,
    common,
    selection,
)
from segdiff_gui.cli.running import (
    report_damaged,
)
from segdiff_gui.cli.stored_runs import runs_source
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import say
from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.errors import InputError
from segdiff_gui.io.masks import write_mask
from segdiff_gui.io.tables import write_pixel_csv
from segdiff_gui.storage.loading import load_group
from segdiff_gui.storage.selection import select_pair

DESCRIPTION = (
    "Write the pixels whose class differs between --ref and --other at the cutoff: a mask "
    "(.png/.tif 0/255, .npy bool) and/or a CSV with every run's exact values, ULP distances and "
    "classes at those pixels (and the exact run's float64 value and class, where the group has "
    "one)."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    selection(parser, ref_required=True)
    parser.add_argument(
        "--other",
        metavar="RUN",
        required=True,
        help=f"the run to compare: {RUN_NAME}",
    )
    parser.add_argument("--mask", metavar="FILE", help="flip mask: .png, .tif or .npy")
    parser.add_argument("--csv", metavar="FILE", help="flipped pixels with every run's values")
    parser.add_argument("--at-risk", action="store_true", help="add at-risk pixels to the CSV")
    common(parser)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    if not (args.mask or args.csv):
        raise InputError("export", "name what to write: --mask FILE and/or --csv FILE")
    source = runs_source(args)
    groups = source.choose(args.model, args.image, args.group)
    candidates = [r for chosen in groups for r in chosen.records]
    reference, other, group = select_pair(source.records, candidates, args.ref, args.other)
    # The group's exact run, where it has one: the CSV gives its value and class at each pixel.
    study = load_group(source.store, source.chosen(group, reference), args.cutoff, source.damaged)
    status = report_damaged(err, source.damaged)
    other_run = next(run for run in study.runs if run.key == other.key)
    flips = study.flips(other_run)
    if args.mask:
        write_mask(args.mask, flips)
        say(
            out,
            f"wrote the flip mask of {other.label} against {reference.label} "
            f"{at_cutoff(args.cutoff, study.multiclass)} "
            f"({_plural(int(flips.sum()), 'flipped pixel')}) to {args.mask}",
        )
    if args.csv:
        count = write_pixel_csv(args.csv, study, other_run, include_at_risk=args.at_risk)
        what = "flipped or at-risk pixel" if args.at_risk else "flipped pixel"
        say(out, f"wrote {_plural(count, what)} to {args.csv}")
    return status
