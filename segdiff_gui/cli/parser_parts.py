"""What every subcommand's parser is made of: the exit codes' epilogue, one-line usage errors,
the number types, and the options several commands share (each command's module in
``cli/commands/`` adds its own)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

from segdiff_gui.cli.exit_codes import EXIT_USAGE
from segdiff_gui.core import shards
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.floatfmt import as_float32
from segdiff_gui.core.tolerance import parse_output_value
from segdiff_gui.runner.arguments import add_repeats_and_timeout, number

__all__ = [
    "EPILOG",
    "REF_HELP",
    "RUN_NAME",
    "Parser",
    "bound_float",
    "bound_int",
    "common",
    "cutoff",
    "matrix_options",
    "output_quantile",
    "output_tolerance",
    "parse_shard",
    "selection",
    "sweep_outputs",
    "two_sides",
]

EPILOG = (
    "exit codes: 0 success, 1 some runs failed, 2 usage or input error, 3 internal error, "
    "130 interrupted"
)


# How every option that names a cached run (--ref, --other, --from, --to) takes it.
RUN_NAME = (
    "a run's id prefix or label ('cpu b1 r0'), or a configuration's label ('cpu b1': its first "
    "repeat)"
)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One clear line and exit 2, as for every other input error.
        self.exit(EXIT_USAGE, f"segdiff: {message} (see '{self.prog} --help')\n")


_cutoff_number = number(float, lambda v: 0.0 <= v <= 1.0, "a cutoff between 0 and 1")


def cutoff(text: str) -> float:
    """A class cutoff, as the flips are counted at it: the float32 it rounds to."""
    return as_float32(_cutoff_number(text))


bound_int = number(int, lambda v: v >= 0, "a whole number of at least 0")
bound_float = number(float, lambda v: math.isfinite(v) and v >= 0, "a finite number ≥ 0")


def _per_output(wanted: str, valid: Callable[[float], bool]) -> Callable[[str], tuple[str, float]]:
    """An argparse type: ``[OUTPUT:]X`` (core/tolerance.parse_output_value)."""

    def parse(text: str) -> tuple[str, float]:
        try:
            return parse_output_value(text, wanted, valid)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


output_tolerance = _per_output("a finite number ≥ 0", lambda v: math.isfinite(v) and v >= 0)
output_quantile = _per_output("a quantile from 0 to 1", lambda v: 0 <= v <= 1)


def common(parser: argparse.ArgumentParser, json_help: str = "") -> None:
    parser.add_argument(
        "--cache",
        metavar="PATH",
        default=argparse.SUPPRESS,  # keep a --cache given before the command
        help="result cache folder (default: $SEGDIFF_CACHE or the user cache folder)",
    )
    if json_help:
        parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and child logs")


def two_sides(
    parser: argparse.ArgumentParser, model: str, base: str, other: str, required: bool = True
) -> None:
    """A model and its images, and two sides to compare: specs or cached runs (``explain``,
    ``layers``; ``required``: both sides must be named)."""
    parser.add_argument("model", nargs="?", help=model)
    parser.add_argument("images", nargs="*", help="image files or folders (batch context)")
    parser.add_argument("--from", dest="from_", required=required, metavar="SPEC|RUN", help=base)
    parser.add_argument("--to", required=required, metavar="SPEC|RUN", help=other)
    parser.add_argument("--demo", action="store_true", help="use the bundled demo model/images")
    parser.add_argument("--target", metavar="NAME", help="the image to study (default: first)")
    parser.add_argument(
        "--image", metavar="NAME", help="with cached runs: the image whose runs are named"
    )
    parser.add_argument(
        "--group", metavar="ID", help="with cached runs: the group (see 'segdiff ls') they are in"
    )


def parse_shard(value: str) -> tuple[int, int]:
    """``K/N``, or the shard the scheduler gave this process (core/shards.py)."""
    try:
        return shards.parse_shard(value, os.environ)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# What --ref means in every command that has it.
REF_HELP = f"reference: {RUN_NAME}; default: this machine's run with every knob at its default"


def matrix_options(parser: argparse.ArgumentParser) -> None:
    """The repeats, timeout and cutoff of the commands that run a matrix (``run``, ``demo``,
    ``explain``)."""
    add_repeats_and_timeout(parser)
    parser.add_argument(
        "--cutoff",
        type=cutoff,
        default=DEFAULT_CUTOFF,
        metavar="T",
        help="class cutoff for the flip counts of sigmoid maps: class = p >= T (default "
        f"{DEFAULT_CUTOFF:g})",
    )


def sweep_outputs(parser: argparse._ActionsContainer) -> None:
    """A sweep's ground truth and CSV (``run --sweep``, ``sweep``)."""
    parser.add_argument(
        "--masks",
        metavar="FOLDER",
        help="ground-truth masks, matched by file name (cell_07.png ↔ FOLDER/cell_07.png or "
        "cell_07_mask.*): Dice and IoU per configuration; implies --sweep",
    )
    parser.add_argument(
        "--csv", metavar="FILE", help="write every image × configuration's figures as CSV"
    )


def selection(parser: argparse.ArgumentParser, ref_required: bool = False) -> None:
    """Which cached runs a command on stored runs reads: a reference, a model, an image or a
    group, from the cache or a bundle, and the cutoff of the flips."""
    parser.add_argument("--ref", metavar="RUN", required=ref_required, help=REF_HELP)
    parser.add_argument("--model", metavar="NAME", help="only runs of this model file name")
    parser.add_argument("--image", metavar="NAME", help="only runs on this image file name")
    parser.add_argument(
        "--group",
        metavar="ID",
        help="only runs of this group (model, image and settings; the id 'segdiff ls' shows)",
    )
    parser.add_argument(
        "--bundle", metavar="FILE", help="read the runs from a bundle instead of the cache"
    )
    parser.add_argument(
        "--cutoff",
        type=cutoff,
        default=DEFAULT_CUTOFF,
        metavar="T",
        help=f"class cutoff for sigmoid maps: class = p >= T (default {DEFAULT_CUTOFF:g}); "
        "softmax maps flip on argmax",
    )
