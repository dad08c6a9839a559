"""``segdiff slurm-script``: a Slurm array job that sweeps a test set in shards, then merges and
sweeps."""

from __future__ import annotations

import argparse
import os
import shlex
import stat
import sys
from pathlib import Path

from rich.console import Console

from segdiff_gui.cli.slurm_script import checked_run, slurm_script
from segdiff_gui.cli.text import say
from segdiff_gui.core.errors import InputError

DESCRIPTION = (
    "Print (or write) an sbatch script whose task K of N runs 'segdiff run MODEL IMAGES … "
    "--shard slurm --bundle RESULTS', so that RESULTS fills with shard-K-of-N.h5; the script "
    "ends with the merge and sweep to run once every task has ended. The options of this "
    "command come first; everything from MODEL on is 'segdiff run''s own arguments "
    "(configurations, repeats, model settings, --masks, --trust-model), checked now."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", type=int, required=True, metavar="N", help="array tasks")
    parser.add_argument(
        "--results",
        default="segdiff-results",
        metavar="FOLDER",
        help="where each task writes its bundle and log (default: segdiff-results)",
    )
    parser.add_argument("--out", metavar="FILE", help="write the script here (default: print)")
    slurm = parser.add_argument_group("sbatch options (written as #SBATCH lines)")
    slurm.add_argument("--job-name", default="segdiff", help="default: segdiff")
    slurm.add_argument("--partition", help="e.g. gpu")
    slurm.add_argument("--gres", help="e.g. gpu:1")
    slurm.add_argument("--cpus-per-task", type=int, metavar="N")
    slurm.add_argument("--mem", help="e.g. 16G")
    slurm.add_argument("--time", help="e.g. 01:00:00")
    slurm.add_argument("--account")
    parser.add_argument(
        "run_arguments",
        nargs=argparse.REMAINDER,
        metavar="MODEL IMAGES … [run options]",
        help="what 'segdiff run' takes",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    if Path(args.results).suffix.lower() in (".h5", ".hdf5"):
        raise InputError(args.results, "--results names a folder (each task writes its own file)")
    run = checked_run(list(args.run_arguments), args.shards)
    here = Path.cwd()
    text = slurm_script(args, run, here)  # every value checked before anything is made
    (here / args.results).mkdir(parents=True, exist_ok=True)  # Slurm writes the logs there
    if args.out is None:
        sys.stdout.write(text)
        return 0
    target = Path(args.out)
    target.write_text(text)
    mode = target.stat().st_mode  # executable where readable, as the umask made it
    target.chmod(mode | stat.S_IXUSR | ((mode & (stat.S_IRGRP | stat.S_IROTH)) >> 2))
    say(out, f"wrote {target}; submit it with: sbatch {shlex.quote(os.fspath(target))}")
    return 0
