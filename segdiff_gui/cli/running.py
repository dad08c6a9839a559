"""What the commands of ``cli/commands`` share: the cache they open, the damaged entries they
name, the matrix request their arguments make, a runner followed on the terminal and its exit
code, and a matrix's report (``run``, ``demo``). Errors a user can fix are raised as
``InputError`` and shown in one line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from segdiff_gui.cli.hints import with_flag
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.summary import differences_table, exact_lines, plain_sentences, verdict_lines
from segdiff_gui.cli.text import TerminalConsole, as_markup, say
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.config import (
    ModelSettings,
    RunConfig,
)
from segdiff_gui.core.errors import InputError, in_few_lines
from segdiff_gui.io.images import collect_images
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.arguments import configs_of, model_settings
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import MatrixOutcome
from segdiff_gui.runner.plan import MatrixPlan, check_model_path, check_source
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.bundle import is_bundle
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.loading import ChosenGroup, load_group
from segdiff_gui.storage.studies import (
    without_exact,
)

if TYPE_CHECKING:
    pass


def open_cache(args: argparse.Namespace, writing: bool = False) -> ResultCache:
    """The cache the command reads; one it writes into must be (or become) a segdiff cache."""
    cache = ResultCache(args.cache) if args.cache else ResultCache()
    cache.check_usable()
    if writing:
        cache.claim()
    return cache


def err_console() -> Console:
    return TerminalConsole(stderr=True, highlight=False, soft_wrap=True)


def report_damaged(err: Console, damaged: Sequence[InputError]) -> int:
    """A line per entry that could not be read, the first few, then how many more; the exit
    code the command then ends with."""
    for line in in_few_lines(damaged):
        say(err, f"segdiff: {line}")
    return EXIT_USAGE if damaged else EXIT_OK


def request_of(
    args: argparse.Namespace, model: Path, images: Sequence[Path], cache: ResultCache, **fields: Any
) -> MatrixRequest:
    """The run request the arguments make: the matrix options every running command has."""
    repeats = getattr(args, "repeats", 1)  # layers and repair run each configuration once
    return MatrixRequest(
        model, tuple(images), cache, repeats=repeats, timeout_s=args.timeout, **fields
    )


def run_matrix(
    args: argparse.Namespace, stderr: Console, request: MatrixRequest
) -> tuple[MatrixOutcome, MatrixPlan]:
    runner = request.start()
    return follow_matrix(args, stderr, runner), runner.plan


def follow_matrix(args: argparse.Namespace, stderr: Console, runner: MatrixRunner) -> MatrixOutcome:
    """Drive ``runner`` showing its progress on ``stderr``; an error in the input that stopped
    it is raised, and each run that failed for one is said in a line."""
    plan = runner.plan
    if plan.damaged and not args.json:
        for entry in plan.damaged:
            say(stderr, f"recomputing a damaged run: {entry}")
    outcome = drive(runner, stderr, quiet=args.json, debug=args.debug)
    if outcome.fatal is not None and args.debug and outcome.fatal.detail:
        stderr.print(outcome.fatal.detail, markup=False, highlight=False)
    # A child that could not load the model, or one reason every run failed for: that is one
    # input error (its child's log was shown as it happened, with --debug).
    if (error := outcome.input_error()) is not None:
        raise error
    if not args.json:
        for run in outcome.failed:
            if run.get("input_error"):
                reason = with_flag(run["error"], run["fix"], args.command)
                said = as_markup(f"{run['label']}: {reason}")
                stderr.print(f"[red]failed[/] {said}", markup=True)
    return outcome


def exit_code(outcome: MatrixOutcome) -> int:
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED_RUNS if outcome.failed else EXIT_OK


@dataclass(frozen=True)
class RunInputs:
    """What ``segdiff run``'s arguments ask for, checked before anything is written or run."""

    configs: tuple[RunConfig, ...]
    settings: ModelSettings
    model: Path
    images: list[Path]
    source: Path | None = None
    source_configs: tuple[RunConfig, ...] = ()


def checked_run_inputs(args: argparse.Namespace) -> RunInputs:
    """``segdiff run``'s cheap checks, arguments then files (``slurm-script`` makes them too,
    at the desk, before N tasks would each fail on them; a sweep's masks are checked by its
    session)."""
    # An artefact's configurations start from its own runtime (``xnnpack=off`` alone).
    configs = configs_of(args.config, args.model)
    source_configs = configs_of(args.source_config, None)
    if source_configs and not args.source:
        raise InputError("--source-config", "configures the --source; give the --source too")
    # A shard, ground truth or a sweep's bundle only make sense over the whole set: each
    # implies a sweep.
    args.sweep = bool(args.sweep or args.shard or args.masks or args.bundle)
    if args.sweep and args.target:
        raise InputError("--target", "a sweep studies every image; drop --target")
    settings = model_settings(args)
    model = check_model_path(args.model)
    source = check_source(model, Path(args.source)) if args.source else None
    return RunInputs(
        configs,
        settings,
        model,
        collect_images(args.images),
        Path(source.path) if source else None,
        source_configs,
    )


def report_matrix(
    args: argparse.Namespace,
    out: Console,
    outcome: MatrixOutcome,
    plan: MatrixPlan,
    cache: ResultCache,
    seconds: float,
) -> int:
    """How every run differs from the reference, then what was computed and what was cached."""
    records, damaged = [], []
    for run in plan.runs:
        if cache.has(run.key):
            try:  # the study needs every map now: each file read once
                records.append(cache.read_run(run.key))
            except InputError as error:  # damaged, and computing it again failed too
                damaged.append(error)
    report_damaged(err_console(), damaged)
    # The exact reference is said beside the runs, not compared among them.
    chosen = ChosenGroup.of_runs(records) if without_exact(records) else None
    study = load_group(cache, chosen, args.cutoff, None) if chosen else None
    if args.json:
        _json(
            {
                **outcome_json(cache, seconds, outcome, plan),
                "comparisons": study.rows() if study else [],
            }
        )
        return exit_code(outcome)
    if study is not None and study.others:
        out.print(differences_table(study, plan.images[plan.target].name))
        for line in plain_sentences(study) + verdict_lines(study):
            say(out, line)
    for line in exact_lines(study) if study is not None else []:
        say(out, line)
    print_counts(out, outcome, plan, cache, seconds)
    return exit_code(outcome)


def outcome_json(
    cache: ResultCache, seconds: float, outcome: MatrixOutcome, plan: MatrixPlan
) -> dict[str, Any]:
    """What ``--json`` says of a matrix that ran (``run``, ``demo``, a sweep): the cache, the
    time, every run in the plan's order and the configurations the model could not take, each
    with why."""
    return {
        "cache": str(cache.root),
        "seconds": round(seconds, 3),
        "runs": outcome.in_plan_order(plan),
        "skipped": [{"label": skip.label, "reason": str(skip.reason)} for skip in plan.skipped],
    }


def print_counts(
    out: Console, outcome: MatrixOutcome, plan: MatrixPlan, cache: ResultCache, seconds: float
) -> None:
    counts = {
        status: sum(r["status"] == status for r in outcome.runs)
        for status in ("finished", "cached", "failed")
    }
    not_run = len(plan.runs) - sum(counts.values())
    skipped = f", {not_run} not run (interrupted)" if not_run else ""
    on = (
        plan.images[plan.target].name
        if len(plan.targets) == 1
        else f"all {_plural(len(plan.targets), 'image')}"
        if len(plan.targets) == len(plan.images)
        else f"{len(plan.targets):,} of {_plural(len(plan.images), 'image')} (this shard)"
    )
    models = plan.model_path.name
    if plan.source is not None:
        models += f" beside its source {plan.source.model_path.name}"
    merged = len(plan.merged)
    from_bundles = f" ({merged} of them merged from bundles)" if merged else ""
    left_out = len(plan.skipped)
    configurations = f"; {_plural(left_out, 'configuration')} skipped" if left_out else ""
    say(
        out,
        f"{_plural(len(plan.runs), 'run')} of {models} on {on}: "
        f"{counts['finished']} computed, {counts['cached']} from the cache{from_bundles}, "
        f"{counts['failed']} failed{skipped}{configurations} ({seconds:.1f} s; cache "
        f"{cache.root})",
    )


def bundle_target(path: Path) -> Path:
    """A bundle file that may be written: not a folder, in one, not another kind of file."""
    if path.is_dir():
        raise InputError(path, "is a folder; give the bundle file to write, e.g. results.h5")
    if not path.parent.is_dir():
        raise InputError(path.parent, "no such folder for the bundle")
    if path.exists() and not is_bundle(path):
        raise InputError(path, "exists and is not a segdiff bundle; not overwriting it")
    return path


def model_and_images(
    args: argparse.Namespace, command: str, purpose: str = ""
) -> tuple[Path, list[Path]]:
    """The model and images the arguments name, or the demo's (``--demo``); ``purpose``: what
    they are for, said where none are named (default: the command)."""
    if args.demo:
        return demo_model(), demo_images()
    if args.model:
        model, images = check_model_path(args.model), collect_images(args.images)
        if not images:
            raise InputError(args.model, "give the images after the model")
        return model, images
    raise InputError(command, f"name the model and images (or --demo) to {purpose or command}")
