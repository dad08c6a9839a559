"""The ``segdiff`` subcommands. Each takes the parsed arguments and two consoles and returns
the exit code; errors a user can fix are raised as ``InputError`` and shown in one line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from segdiff_gui.cli.hints import with_flag
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.summary import differences_table, exact_lines, plain_sentences, verdict_lines
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import TerminalConsole, as_markup, say
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.config import (
    ModelSettings,
    RunConfig,
)
from segdiff_gui.core.errors import InputError, in_few_lines
from segdiff_gui.core.runtime_defaults import on_off
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.shards import shard_slice
from segdiff_gui.core.test_sets import (
    SetCoverage,
    ShardManifest,
    images_with_runs,
    manifests_of,
    set_coverage,
)
from segdiff_gui.core.text import shape_text
from segdiff_gui.io.images import collect_images
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.arguments import configs_of, model_settings
from segdiff_gui.runner.matrices import demo_configs
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import MatrixOutcome
from segdiff_gui.runner.plan import MatrixPlan, check_model_path, check_source
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.bundle import check_bundle, is_bundle, merge_bundle, write_bundle
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_runs
from segdiff_gui.storage.set_manifests import cache_manifests
from segdiff_gui.storage.studies import (
    distinguish_batches,
    exact_of,
    group_id,
    load_study,
    settings_text,
    without_exact,
)

if TYPE_CHECKING:
    from segdiff_gui.core.sweep import SweepSummary
    from segdiff_gui.runner.sweeps import SweepResult


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


def _runtime_text(provenance: Provenance) -> str:
    """``TF 2.21.0``, ``jax 0.10.2``: what computed a stored run, as narrow as the column
    of TensorFlow versions it replaces (a table must fit a terminal of 80 columns)."""
    runtime = provenance.runtime
    text = f"{'TF' if runtime == 'tensorflow' else runtime} {provenance.version}".strip()
    onednn = provenance.onednn_enabled
    known = RUNTIMES.get(runtime)
    # TensorFlow's kernels (Keras 3's or Keras 2's): the default depends on the CPU
    if known is not None and known.tensorflow_kernels and onednn is not None:
        text += f", oneDNN {on_off(onednn)}"
    if provenance.defaults_in_effect.xla:  # model.predict's choice; the label shows a set one
        text += ", XLA"
    if (precision := provenance.inference_precision) is not None:  # OpenVINO's, by the CPU
        text += f", {precision}"
    if (xnnpack := provenance.xnnpack) is not None:  # each session's own, read back
        text += f", XNNPACK {on_off(xnnpack)}"
    if (level := provenance.graph_optimization) is not None:
        text += f", opt {level}"
    return text


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


def command_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    # Cheap checks first (arguments, then files), then the device probe, then TensorFlow.
    checked = checked_run_inputs(args)
    bundle = _sweep_bundle_path(args.bundle, args.shard) if args.bundle else None
    request = request_of(
        args,
        checked.model,
        checked.images,
        cache,
        configs=checked.configs,
        target=args.target,
        settings=checked.settings,
        sweep=args.sweep,
        shard=args.shard,
        strict=args.strict,
        source=checked.source,
        source_configs=checked.source_configs,
    )
    sweep = None
    if args.sweep:  # its masks are checked against the images before anything runs
        from segdiff_gui.cli.sweep_view import sweep_session  # a sweep's only (5 ms)

        sweep = sweep_session(args, cache, request=request)
    if args.shard and not shard_slice(len(checked.images), args.shard):
        # A scheduler's array may be larger than the set: an empty shard is no error.
        say(err, f"shard {args.shard[0]}/{args.shard[1]} of {len(checked.images)} images is empty")
        return EXIT_OK
    started = time.perf_counter()
    if sweep is not None:
        result = sweep.run(lambda runner: follow_matrix(args, err, runner))
        status = _report_sweep(args, out, result, cache, time.perf_counter() - started)
        if bundle is not None:
            _bundle_sweep(args, bundle, result, cache, out)
        return status
    outcome, plan = run_matrix(args, err, request)
    return _report(args, out, outcome, plan, cache, time.perf_counter() - started)


def command_ls(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args)
    scan = cache.scan(with_maps=True)  # every map's checksum too: ls tells what is damaged
    # Grouped as people compare them: model, image, settings group, then the runs in order.
    groups = {r.key: group_id(r) for r in scan.records}
    by_group: dict[str, list[RunRecord]] = {}
    for record in scan.records:
        by_group.setdefault(groups[record.key], []).append(record)
    # A configuration run with two batches (another image set) is named with each.
    named = [r for group in by_group.values() for r in distinguish_batches(group)]
    records = sorted(named, key=lambda r: (r.model_name, r.target_name, groups[r.key], r.label))
    status = report_damaged(err, scan.damaged)
    if args.json:
        _json(
            [
                {
                    "id": r.short_id,
                    "key": r.key,
                    "label": r.label,
                    "group": groups[r.key],
                    "model": r.model_name,
                    "image": r.target_name,
                    "shape": list(r.map_shape),
                    "kind": r.kind,
                    "config": r.config,
                    "repeat": r.repeat,
                    "preprocessing": r.preprocessing,
                    "output": r.output,
                    "provenance": r.provenance.to_dict(),
                }
                for r in records
            ]
        )
        return status
    if not records:
        say(out, f"no runs in {cache.root}")
        return status
    table = FittedTable(title=f"{_plural(len(records), 'run')} in {cache.root}")
    # Runs of one model and image that differ in their settings must not look alike: the
    # settings column names what is not the default, and the group tells the groups apart.
    with_settings = any(settings_text(r) for r in records)
    table.figure("id", justify="left")
    table.name("label")
    table.figure("group", justify="left")
    table.name("model")
    table.name("image")
    if with_settings:
        table.text("settings")
    table.text("map")
    table.name("device")
    table.text("runtime")
    # The host says where a merged run came from: kept whole while the others can wrap.
    table.name("host", last=True)
    table.figure("when", justify="left")
    for r in records:
        p = r.provenance
        cells = (
            r.short_id,
            r.label,
            groups[r.key],
            r.model_name,
            r.target_name,
            *((settings_text(r) or "defaults",) * with_settings),
            shape_text(r.map_shape) + f" {r.kind}",
            p.device or "",
            _runtime_text(p),
            (p.hostname or "")
            + (f" (merged from {p.merged_from_bundle or 'a bundle'})" if p.merged else ""),
            (p.timestamp or "")[:19].replace("T", " "),
        )
        table.add_row(*cells)
    out.print(table)
    return status


def command_demo(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    request = request_of(args, demo_model(), demo_images(), cache, matrix=demo_configs)
    started = time.perf_counter()
    outcome, plan = run_matrix(args, err, request)
    return _report(args, out, outcome, plan, cache, time.perf_counter() - started)


def _report(
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
    compared = without_exact(records)  # the exact reference is said beside, not compared
    exact = exact_of(records, compared[0]) if compared else None
    study = load_study(cache, compared, args.cutoff, exact=exact) if compared else None
    if args.json:
        _json(
            {
                "cache": str(cache.root),
                "seconds": round(seconds, 3),
                "runs": outcome.in_plan_order(plan),
                "skipped": _skipped_json(plan),
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
    _print_counts(out, outcome, plan, cache, seconds)
    return exit_code(outcome)


def _skipped_json(plan: MatrixPlan) -> list[dict[str, str]]:
    """The configurations the model could not take, each with why (``--json``)."""
    return [{"label": skip.label, "reason": str(skip.reason)} for skip in plan.skipped]


def _print_counts(
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


def _report_sweep(
    args: argparse.Namespace, out: Console, result: SweepResult, cache: ResultCache, seconds: float
) -> int:
    """A sweep's report covers the images it ran (a shard reports on its own slice)."""
    from segdiff_gui.cli.sweep_view import print_sweep, write_csv

    report_damaged(err_console(), result.damaged)
    summary, outcome, plan = result.summary, result.outcome, result.plan
    assert outcome is not None and plan is not None  # it ran its request
    if summary is not None:
        write_csv(args, out, summary)
    if args.json:
        _json(
            {
                "cache": str(cache.root),
                "seconds": round(seconds, 3),
                "runs": outcome.in_plan_order(plan),
                "skipped": _skipped_json(plan),
                "sweep": summary.to_dict() if summary else None,
            }
        )
        return _sweep_status(args, outcome, summary)
    if summary is not None:
        print_sweep(summary, out)
    _print_counts(out, outcome, plan, cache, seconds)
    return _sweep_status(args, outcome, summary)


def _sweep_status(
    args: argparse.Namespace, outcome: MatrixOutcome, summary: SweepSummary | None
) -> int:
    """A sweep of a whole set that is not whole (merged shards missing) never passes; a
    shard's own run is one shard by design, and is judged by its runs."""
    incomplete = summary is not None and summary.incomplete and not args.shard
    return max(exit_code(outcome), EXIT_FAILED_RUNS if incomplete else EXIT_OK)


def _sweep_bundle_path(given: str, shard: tuple[int, int] | None) -> Path:
    """Where ``run --bundle`` writes: the file given, or in the folder given (made if need
    be) a name from the shard, numbered to sort (``shard-03-of-12.h5``). Checked before
    anything runs."""
    path = Path(given)
    if path.suffix.lower() not in (".h5", ".hdf5"):
        number, total = shard or (1, 1)
        width = len(str(total))
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(
                path, f"cannot be made a folder for bundles ({error.strerror})"
            ) from None
        path = path / f"shard-{number:0{width}d}-of-{total}.h5"
    return _bundle_target(path)


def _bundle_target(path: Path) -> Path:
    """A bundle file that may be written: not a folder, in one, not another kind of file."""
    if path.is_dir():
        raise InputError(path, "is a folder; give the bundle file to write, e.g. results.h5")
    if not path.parent.is_dir():
        raise InputError(path.parent, "no such folder for the bundle")
    if path.exists() and not is_bundle(path):
        raise InputError(path, "exists and is not a segdiff bundle; not overwriting it")
    return path


def _bundle_sweep(
    args: argparse.Namespace, path: Path, result: SweepResult, cache: ResultCache, out: Console
) -> None:
    """The sweep's runs that are stored, and its manifest (which images of which set, and
    those whose runs failed), in one bundle."""
    manifest = result.manifest
    assert manifest is not None  # it ran its request
    count = write_bundle(cache, list(result.stored), path, [manifest])
    if not args.json:
        lacking = _plural(len(manifest.missing), "image")
        incomplete = f"; runs are missing for {lacking} of it" if manifest.missing else ""
        say(out, f"wrote {_plural(count, 'run')} of {manifest.part_text} to {path}{incomplete}")


def command_bundle(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args)
    target = _bundle_target(Path(args.out))
    scan = cache.scan(with_maps=True)  # a run whose map is damaged is left out, and named
    records = select_runs(scan.records, args.runs)
    if not records:
        report_damaged(err, scan.damaged)
        raise InputError(cache.root, "holds no runs to bundle")
    # The test sets merged here that these runs belong to travel with them (a damaged record
    # cannot, and is named below).
    known, unreadable = cache_manifests(cache)
    carried = manifests_of(known, ((r.study_model_hash, r.target_hash) for r in records))
    count = write_bundle(cache, [r.key for r in records], target, carried)
    if args.json:
        _json({"bundle": str(target), "runs": [r.key for r in records]})
    else:
        shards = f", with {_plural(len(carried), 'test-set shard')}" if carried else ""
        say(out, f"wrote {_plural(count, 'run')} to {target}{shards}")
    # The damaged ones are left out, and said to be: the bundle is not all the cache had.
    return report_damaged(err, [*scan.damaged, *unreadable])


def command_merge(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    bundles = [check_bundle(path) for path in args.bundles]  # all read whole before any merge
    results = {str(bundle.path): merge_bundle(bundle.path, cache) for bundle in bundles}
    sets = _merged_sets(cache, [m for r in results.values() for m in r.manifests], err)
    if args.json:
        merged = {
            path: {**vars(result), "manifests": [m.to_dict() for m in result.manifests]}
            for path, result in results.items()
        }
        _json({**merged, "test_sets": [coverage.to_dict() for coverage in sets]})
        return EXIT_OK
    for path, result in results.items():
        others = len(result.from_other_machines)
        beside = f" ({others} from another machine, kept beside this one's)" if others else ""
        repaired = f", {len(result.repaired)} replacing damaged copies" if result.repaired else ""
        say(
            out,
            f"{path}: {len(result.added)} added{beside}{repaired}, "
            f"{len(result.identical)} already present",
        )
        for key in result.conflicts:
            say(
                err,
                f"{path}: run {key[:8]} is already cached with different values from the same "
                "machine; kept the cached one (a nondeterministic configuration?)",
            )
    for coverage in sets:  # shards arrive one by one: what is still missing is said, once
        if coverage.complete:
            say(out, coverage.merged_sentence())
        else:
            say(err, coverage.sentence())
    return EXIT_OK


def _merged_sets(
    cache: ResultCache, merged: list[ShardManifest], err: Console
) -> list[SetCoverage]:
    """How whole each test set that a merged bundle belongs to now is in ``cache``: its shards
    merged so far (this time or before), counted by the runs the cache holds of their images
    (a record is no evidence of runs that are not there)."""
    known, damaged = cache_manifests(cache)
    report_damaged(err, damaged)
    wanted = {(m.set_id, m.model_hash) for m in merged}
    if not wanted:
        return []
    models = {model for _, model in wanted}
    runs = {
        (r.study_model_hash, r.target_hash, r.label)
        for r in cache.records()
        if r.study_model_hash in models
    }
    found = []
    for set_id, model in sorted(wanted):
        chosen = [m for m in known if m.set_id == set_id]
        found += set_coverage(chosen, model, images_with_runs(chosen, runs))
    return found
