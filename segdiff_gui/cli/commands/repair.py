"""``segdiff repair``: the layers to keep in float32 so that a reduced precision stops flipping
pixels."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    bound_int,
    common,
    cutoff,
)
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.running import (
    exit_code,
    model_and_images,
    open_cache,
    request_of,
)
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import as_markup, print_json, say
from segdiff_gui.core.config import (
    parse_config_spec,
)
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.repair import RepairResult, repair_code
from segdiff_gui.runner.arguments import (
    add_layer_budgets,
    add_model_settings,
    add_timeout,
    model_settings,
)
from segdiff_gui.runner.repair import RepairSession

DESCRIPTION = (
    "Probe --config (a reduced precision: mixed_bfloat16 or mixed_float16) "
    "against --reference (default: the same configuration in float32) layer by layer, "
    "order the layers by the error each adds, and search for a small set to keep in "
    "float32 so that the flips at --cutoff fall to --bound or fewer: the most blamed "
    "layers first, the smallest such prefix found by rounds of trials, then pruned until no "
    "single layer can go. Every trial is a cached run (keep_float32=A+B in --config). "
    "Prints the layers, the flips and max ULP before and after, and the Keras code that "
    "applies them to your model."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help=".keras or legacy .h5 (functional/Sequential)")
    parser.add_argument("images", nargs="*", help="image files or folders (batch context)")
    parser.add_argument(
        "--config",
        metavar="SPEC",
        default="precision=bf16",
        help="the reduced-precision configuration to repair (default: precision=bf16)",
    )
    parser.add_argument(
        "--reference",
        metavar="SPEC",
        help="what it must agree with (default: --config with precision=float32)",
    )
    parser.add_argument("--demo", action="store_true", help="use the bundled demo model/images")
    parser.add_argument("--target", metavar="NAME", help="the image to study (default: first)")
    parser.add_argument(
        "--cutoff", type=cutoff, default=DEFAULT_CUTOFF, help="class cutoff of the flips"
    )
    parser.add_argument(
        "--bound", type=bound_int, default=0, help="flips allowed after the repair (default 0)"
    )
    parser.add_argument("--code", metavar="FILE", help="write the Keras code that applies it here")
    add_timeout(parser)
    add_layer_budgets(parser)
    add_model_settings(parser)
    common(parser, "print the repair as JSON (the code included)")


def _repair_table(result: RepairResult) -> FittedTable:
    table = FittedTable(
        title="Trials (each a cached run), fewest layers kept first",
        caption="kept: layers computing in float32; the rest under the reduced precision",
    )
    for header in ("kept", "flips", "max ULP", "differing px"):
        table.figure(header)
    table.text("layers kept in float32")  # names, a comma after each: wrapped between them
    for trial in sorted(result.trials, key=lambda t: (len(t.kept), t.flips or 0))[:20]:
        flips = "failed" if trial.flips is None else f"{trial.flips:,}"
        table.add_row(
            str(len(trial.kept)),
            flips,
            f"{trial.max_ulp:,}",
            f"{trial.differing_pixels:,}",
            ", ".join(trial.kept),
        )
    return table


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    model, images = model_and_images(args, "repair")
    target = parse_config_spec(args.config)
    reference = parse_config_spec(args.reference) if args.reference else None
    request = request_of(
        args, model, images, cache, target=args.target, settings=model_settings(args)
    )
    session = RepairSession(
        request, target, reference=reference, cutoff=args.cutoff, bound=args.bound,
        memory_budget=args.memory, disk_budget=args.keep,
    )  # fmt: skip
    status, computed = EXIT_OK, 0
    for what, runner in session.runners():
        if not args.json:
            err.print(f"[dim]{as_markup(what)}[/]", markup=True)
        verb = "probed" if what == "layer probes" else "finished"
        outcome = drive(runner, err, quiet=args.json, debug=args.debug, done=verb)
        if outcome.fatal is not None:
            raise InputError(outcome.fatal.path, outcome.fatal.problem, outcome.fatal.fix)
        status = max(status, exit_code(outcome))
        computed += sum(run["status"] == "finished" for run in outcome.runs)
    result = session.result
    assert result is not None
    code = repair_code(model.name, result.precision, result.kept) if result.kept else ""
    if args.code and code:
        Path(args.code).write_text(code, encoding="utf-8")
    if args.json:
        print_json(
            {**result.to_dict(), "model": model.name, "code": code, "runs_computed": computed}
        )
        return status
    blamed = ", ".join(result.order[:5])
    say(out, f"Layers by the error they add (the probe's blame): {blamed} …")
    if result.trials:
        out.print(_repair_table(result))
    for line in result.sentences():
        say(out, line)
    if code and not args.code:
        out.print("\nApply it to your model (Keras):\n", markup=False)
        out.print(code, markup=False, highlight=False)
    elif code:
        say(out, f"The Keras code that applies it is in {args.code}.")
    return status
