"""``segdiff slurm-script``: a sweep as a Slurm array job, written for the user. Task K of N
runs shard K of N of the images (``--shard slurm``) into a cache of its own and writes its runs
to ``RESULTS/shard-K-of-N.h5`` (``--bundle``); the script ends with the merge and the sweep
that follow. The run's own arguments are checked here, as ``segdiff run`` would, so that a
mistake is said at the desk and not in N task logs."""

from __future__ import annotations

import argparse
import os
import shlex
import stat
import sys
from pathlib import Path

from rich.console import Console

from segdiff_gui.cli.parser import build_parser
from segdiff_gui.cli.text import say
from segdiff_gui.core.errors import InputError
from segdiff_gui.io.images import collect_images
from segdiff_gui.runner.plan import check_model_path
from segdiff_gui.version import __version__

__all__ = ["command_slurm_script", "slurm_script"]

# The #SBATCH lines taken as given (option → sbatch's own option).
_SBATCH = {
    "job_name": "--job-name",
    "partition": "--partition",
    "gres": "--gres",
    "cpus_per_task": "--cpus-per-task",
    "mem": "--mem",
    "time": "--time",
    "account": "--account",
}
# What the script sets itself: a run given them would fight it.
_SET_BY_THE_SCRIPT = ("--shard", "--bundle", "--target", "--json")


def _checked_run(arguments: list[str], shards: int) -> argparse.Namespace:
    """The run's arguments parsed as ``segdiff run`` parses them, its model and images found."""
    if not arguments:
        raise InputError("slurm-script", "give MODEL and IMAGES, then any 'segdiff run' options")
    if given := sorted({a.split("=")[0] for a in arguments} & set(_SET_BY_THE_SCRIPT)):
        raise InputError(
            "slurm-script", f"the script sets {', '.join(given)} itself; drop it from the run"
        )
    try:
        parsed = build_parser().parse_args(["run", *arguments])
    except SystemExit:  # argparse said why, on standard error
        raise InputError(
            "slurm-script",
            "the run's arguments above are not what 'segdiff run' takes (this command's own "
            "options go before MODEL)",
        ) from None
    check_model_path(parsed.model)
    count = len(collect_images(parsed.images))
    if not 1 <= shards <= count:
        raise InputError("--shards", f"{shards} is not from 1 to the {count} images given")
    return parsed


def slurm_script(args: argparse.Namespace, run: argparse.Namespace, here: Path) -> str:
    """The script's text: sbatch lines, one task's run, and the merge and sweep after."""
    segdiff = f"{shlex.quote(sys.executable)} -m segdiff_gui.cli"  # this very installation
    results = (here / args.results).resolve()
    lines = [
        "#!/bin/bash",
        f"# A segdiff {__version__} sweep as a Slurm array job: task K of {args.shards} runs",
        f"# shard K/{args.shards} of the images and writes {results}/shard-K-of-{args.shards}.h5.",
        f"#SBATCH --array=1-{args.shards}",
        f"#SBATCH --chdir={shlex.quote(str(here))}",
        f"#SBATCH --output={shlex.quote(str(results))}/slurm-%A_%a.log",
    ]
    for name, option in _SBATCH.items():
        value = getattr(args, name)
        if value is not None:
            lines.append(f"#SBATCH {option}={shlex.quote(str(value))}")
    run_line = " ".join(shlex.quote(word) for word in args.run_arguments)
    sweep = ["--model", Path(run.model).name, *(["--masks", run.masks] if run.masks else [])]
    after = f"{segdiff} merge {shlex.quote(str(results))}/shard-*-of-{args.shards}.h5 && "
    after += f"{segdiff} sweep {' '.join(shlex.quote(word) for word in sweep)}"
    lines += [
        "set -euo pipefail",
        "# Each task computes into a cache of its own; its bundle carries the runs home.",
        'export SEGDIFF_CACHE="${TMPDIR:-/tmp}/segdiff-${SLURM_ARRAY_JOB_ID}-'
        '${SLURM_ARRAY_TASK_ID}"',
        "trap 'rm -rf -- \"$SEGDIFF_CACHE\"' EXIT",
        f"{segdiff} run {run_line} --shard slurm --bundle {shlex.quote(str(results))}",
        "",
        "# Once every task has ended, merge the shards and sweep the whole set (a shard or an",
        "# image that is missing is named, and the sweep exits 1):",
        f"#   {after}",
        "# or as a job that waits for this array:",
        f"#   sbatch --dependency=afterany:JOBID --chdir={shlex.quote(str(here))} "
        f"--wrap {shlex.quote(after)}",
        "",
    ]
    return "\n".join(lines)


def command_slurm_script(args: argparse.Namespace, out: Console, err: Console) -> int:
    run = _checked_run(list(args.run_arguments), args.shards)
    here = Path.cwd()
    (here / args.results).mkdir(parents=True, exist_ok=True)  # Slurm writes the logs there
    text = slurm_script(args, run, here)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    target = Path(args.out)
    target.write_text(text)
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    say(out, f"wrote {target}; submit it with: sbatch {shlex.quote(os.fspath(target))}")
    return 0
