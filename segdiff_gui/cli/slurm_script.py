"""``segdiff slurm-script``: a sweep as a Slurm array job, written for the user. Task K of N
runs shard K of N of the images (``--shard slurm``) into a cache of its own and writes its runs
to ``RESULTS/shard-K-of-N.h5`` (``--bundle``); the script ends with the merge and the sweep
that follow. The run's own arguments are checked here, as ``segdiff run`` would, so that a
mistake is said at the desk and not in N task logs."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from segdiff_gui.cli.parser import build_parser
from segdiff_gui.cli.running import checked_run_inputs
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import has_control
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.runner.plan import check_inputs, model_input
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.version import __version__

__all__ = ["checked_run", "slurm_script"]

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
# What the script sets itself (the options' destinations in ``segdiff run``'s namespace):
# a run given them would fight it.
_SET_BY_THE_SCRIPT = {
    "shard": "--shard",
    "bundle": "--bundle",
    "target": "--target",
    "json": "--json",
    "cache": "--cache",
}


def checked_run(arguments: list[str], shards: int) -> argparse.Namespace:
    """The run's arguments parsed as ``segdiff run`` parses them, and checked as it checks
    them before it runs anything (configurations, settings, model, images and what the
    model takes of them, masks)."""
    if not arguments:
        raise InputError("slurm-script", "give MODEL and IMAGES, then any 'segdiff run' options")
    if "--" in arguments:
        raise InputError(
            "slurm-script", "drop '--': MODEL and IMAGES follow this command's options"
        )
    try:
        parsed = build_parser(lazy=True).parse_args(["run", *arguments])
    except SystemExit:  # argparse said why, on standard error
        raise InputError(
            "slurm-script",
            "the run's arguments above are not what 'segdiff run' takes (this command's own "
            "options go before MODEL)",
        ) from None
    given = [flag for name, flag in _SET_BY_THE_SCRIPT.items() if getattr(parsed, name, None)]
    if given:
        raise InputError(
            "slurm-script", f"the script sets {', '.join(given)} itself; drop it from the run"
        )
    checked = checked_run_inputs(parsed)
    count = len(checked.images)
    if not 1 <= shards <= count:
        raise InputError("--shards", f"{shards} is not from 1 to the {count} images given")
    if parsed.masks:
        TruthFolder(parsed.masks)  # as the sweep's session checks them before anything runs
    # What the model takes, asked of a child (remembered in this machine's cache, as a run
    # remembers it: the cache is claimed first, as a run claims it), and every image checked
    # against it as the planner checks an image.
    settings = checked.settings
    cache = ResultCache()
    cache.claim()
    taken = model_input(checked.model, settings.trust_model, cache.root)
    check_inputs(checked.images, settings.preprocessing, taken)
    return parsed


def _writable(text: str, what: str) -> str:
    """``text`` as it may be written anywhere in the script, on a live line or in a comment.
    A line break ends a comment and starts a line that every task runs, and a shell's quotes
    do not hold there: a value with any control character (line breaks, tabs, escapes) is
    refused, naming it."""
    if has_control(text):
        raise InputError(
            text, f"holds a control character (a line break, a tab, an escape), which a Slurm "
            f"script cannot carry safely ({what}); rename it"
        )  # fmt: skip
    return text


def _word(text: str, what: str) -> str:
    """A value as the shell reads it as one word, checked for every place it is written."""
    return shlex.quote(_writable(text, what))


def _sbatch_value(text: str, what: str) -> str:
    """A value as an ``#SBATCH`` line takes it: sbatch reads double quotes, not a shell's
    single ones, and has no escape for a double quote or a line break."""
    if '"' in _writable(text, what):
        raise InputError(text, f"cannot be written on an #SBATCH line ({what})")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def slurm_script(args: argparse.Namespace, run: argparse.Namespace, here: Path) -> str:
    """The script's text: sbatch lines, one task's run, and the merge and sweep after."""
    # Every value is checked where it is made a word (_word, _sbatch_value, _writable): the
    # comments below carry them too, and a line break there would be a live line.
    segdiff = f"{_word(sys.executable, 'the Python that runs segdiff')} -m segdiff_gui.cli"
    results = (here / args.results).resolve()
    folder = _word(str(results), "--results")
    # Slurm expands % in --output (%A the job, %a the task): a % of the path is doubled.
    log = _sbatch_value(str(results).replace("%", "%%") + "/slurm-%A_%a.log", "--output")
    chdir = _sbatch_value(str(here), "--chdir, the current folder")
    lines = [
        "#!/bin/bash",
        f"# A segdiff {__version__} sweep as a Slurm array job: task K of {args.shards} runs",
        f"# shard K/{args.shards} of the images and writes {results}/shard-K-of-{args.shards}.h5.",
        f"#SBATCH --array=1-{args.shards}",
        f"#SBATCH --chdir={chdir}",
        f"#SBATCH --output={log}",
    ]
    for name, option in _SBATCH.items():
        value = getattr(args, name)
        if value is not None:
            lines.append(f"#SBATCH {option}={_sbatch_value(str(value), option)}")
    sweep = [_word(Path(run.model).name, "the model")]
    if run.masks:
        sweep += ["--masks", _word(run.masks, "--masks")]
    after = f"{segdiff} merge {folder}/shard-*-of-{args.shards}.h5 && "
    after += f"{segdiff} sweep --model {' '.join(sweep)}"
    given = " ".join(_word(argument, "the run's arguments") for argument in args.run_arguments)
    lines += [
        "set -euo pipefail",
        "# Each task computes into a cache of its own; its bundle carries the runs home.",
        'export SEGDIFF_CACHE="${TMPDIR:-/tmp}/segdiff-${SLURM_ARRAY_JOB_ID}-'
        '${SLURM_ARRAY_TASK_ID}"',
        "trap 'rm -rf -- \"$SEGDIFF_CACHE\"' EXIT",
        f"{segdiff} run {given} --shard slurm --bundle {folder}",
        "",
        "# Once every task has ended, merge the shards and sweep the whole set (a shard or an",
        "# image that is missing is named, and the sweep exits 1):",
        f"#   {after}",
        "# or as a job that waits for this array:",
        f"#   sbatch --dependency=afterany:JOBID --chdir={_word(str(here), '--chdir')} "
        f"--wrap {shlex.quote(after)}",
        "",
    ]
    return "\n".join(lines)
