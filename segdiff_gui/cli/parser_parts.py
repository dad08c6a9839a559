"""What every subcommand's parser is made of: the exit codes' epilogue, one-line usage errors,
the number types, and the options several commands share."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

from segdiff_gui.cli.exit_codes import EXIT_USAGE
from segdiff_gui.core import shards
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.floatfmt import as_float32
from segdiff_gui.core.tolerance import parse_output_value
from segdiff_gui.runner.arguments import number

__all__ = [
    "EPILOG",
    "Parser",
    "bound_float",
    "bound_int",
    "common",
    "cutoff",
    "output_quantile",
    "output_tolerance",
    "parse_shard",
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
