"""``segdiff demo``: the bundled demo's matrix, and how its maps differ."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from rich.console import Console

from segdiff_gui.cli.parser_parts import (
    common,
    matrix_options,
)
from segdiff_gui.cli.running import (
    open_cache,
    report_matrix,
    request_of,
    run_matrix,
)
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.matrices import demo_configs

if TYPE_CHECKING:
    pass
from segdiff_gui.cli import parser_parts

DESCRIPTION = (
    "Run the bundled U-Net on synthetic cell images under batch 1 and 64, one intra-op thread, "
    "XLA and bfloat16 (two repeats each), plus every GPU present, and show how the maps differ. "
    "Cached runs are not recomputed."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    matrix_options(parser)
    common(parser, "print the runs and comparisons as JSON on stdout")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    request = request_of(args, demo_model(), demo_images(), cache, matrix=demo_configs)
    started = time.perf_counter()
    outcome, plan = run_matrix(args, err, request)
    return report_matrix(args, out, outcome, plan, cache, time.perf_counter() - started)
