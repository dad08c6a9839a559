"""``segdiff run``: a model on images under a configuration matrix, or a whole test set (a sweep, a
shard of one)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_OK
from segdiff_gui.cli.parser_parts import (
    common,
    matrix_options,
    parse_shard,
    sweep_outputs,
)
from segdiff_gui.cli.running import (
    bundle_target,
    checked_run_inputs,
    err_console,
    exit_code,
    follow_matrix,
    open_cache,
    report_damaged,
    report_matrix,
    request_of,
    run_matrix,
)
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.cli.text import say
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.shards import shard_slice
from segdiff_gui.runner.arguments import (
    add_configs,
    add_model_settings,
    add_source,
)
from segdiff_gui.runner.outcome import MatrixOutcome
from segdiff_gui.storage.bundle import write_bundle
from segdiff_gui.storage.cache import ResultCache

if TYPE_CHECKING:
    from segdiff_gui.core.sweep import SweepSummary
    from segdiff_gui.runner.sweeps import SweepResult
from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.running import outcome_json, print_counts

DESCRIPTION = (
    "Run MODEL on the target image under each --config (default: batch 1 and 64 on every "
    "device), each configuration in a child process of its runtime (TensorFlow, or Keras 3's "
    "JAX or PyTorch backend: runtime=jax|torch), and cache every probability map. Then show how "
    "each run differs from the reference (the run nearest the defaults)."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help=".keras, legacy .h5, a SavedModel folder, or your own .tflite, .onnx or OpenVINO "
        "IR .xml",
    )
    parser.add_argument(
        "images",
        nargs="+",
        help="image files or folders of them (PNG, JPEG, TIFF, NPY; "
        "folders are not searched recursively); they also fill batches as context",
    )
    add_configs(parser)
    add_source(parser)
    matrix_options(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse the whole matrix (exit 2) when the model cannot take one of its "
        "configurations (a SavedModel under precision=float64, say); by default that "
        "configuration is skipped, said in one line, and the others run",
    )
    add_model_settings(parser)
    sweep = parser.add_argument_group("test-set sweep")
    sweep.add_argument(
        "--sweep",
        action="store_true",
        help="study every image, not one target, and report the whole set",
    )
    sweep.add_argument(
        "--shard",
        type=parse_shard,
        metavar="K/N|slurm|k8s/N",
        help="run only shard K of N of the images (a contiguous, deterministic slice; batches "
        "still draw on the whole set); implies --sweep. Bundle each shard, then merge. "
        "'slurm': K and N from this Slurm array task (SLURM_ARRAY_TASK_ID, _MIN, _MAX, "
        "_COUNT, _STEP); 'k8s/N': K from a Kubernetes indexed Job's JOB_COMPLETION_INDEX",
    )
    sweep.add_argument(
        "--bundle",
        metavar="FILE|FOLDER",
        help="write this sweep's runs, and which shard of which test set they are, to a "
        "bundle: FILE.h5, or in FOLDER as shard-K-of-N.h5; implies --sweep. 'segdiff merge' "
        "then 'segdiff sweep' name any shard or image that is missing",
    )
    sweep_outputs(sweep)
    parser.set_defaults(model_name=None, ref_configuration=None)
    common(parser, "print the runs and comparisons as JSON on stdout")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
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
    return report_matrix(args, out, outcome, plan, cache, time.perf_counter() - started)


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
                **outcome_json(cache, seconds, outcome, plan),
                "sweep": summary.to_dict() if summary else None,
            }
        )
        return _sweep_status(args, outcome, summary)
    if summary is not None:
        print_sweep(summary, out)
    print_counts(out, outcome, plan, cache, seconds)
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
    return bundle_target(path)


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
