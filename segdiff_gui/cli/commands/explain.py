"""``segdiff explain``: a difference attributed to knobs, one at a time and cumulatively."""

from __future__ import annotations

import argparse

from rich.console import Console

from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    RUN_NAME,
    common,
    matrix_options,
    two_sides,
)
from segdiff_gui.cli.running import (
    exit_code,
    model_and_images,
    open_cache,
    report_damaged,
    request_of,
    run_matrix,
)
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import as_markup, say
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.analysis import flips_heading
from segdiff_gui.core.attribution import Attribution, Effect
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import printable
from segdiff_gui.runner.arguments import (
    add_model_settings,
    configs_of,
    model_settings,
)
from segdiff_gui.runner.explain import (
    AttributionSession,
    compared_runs,
    measure_between,
    measured_on,
)
from segdiff_gui.storage.selection import select_pair
from segdiff_gui.storage.studies import comparable_groups

DESCRIPTION = (
    "Plan the runs that change one knob at a time from --from, and the path from --from to --to "
    "knob after knob; run what is not cached; and report how much each knob contributes (max "
    "ULP, differing pixels, flips at the cutoff, at-risk pixels), with the spread over repeats "
    "on lines of their own. With two cached runs (id or label) instead of specs, only what is "
    "cached is measured."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    two_sides(
        parser,
        ".keras, legacy .h5, or a SavedModel folder",
        f"base: key=value spec (e.g. device=cpu,batch=1) or a cached run: {RUN_NAME}",
        "target: a spec or a cached run, named as --from names one",
    )
    matrix_options(parser)
    add_model_settings(parser)
    common(parser, "print the attribution as JSON")


def _size(effect: Effect | None) -> tuple[int, int]:
    return (effect.max_ulp, effect.differing_pixels) if effect else (-1, -1)


def _figures(effect: Effect | None) -> list[str]:
    return effect.cells() if effect else ["not measured", "", "", "", ""]


def attribution_table(attribution: Attribution) -> FittedTable:
    """Alone: each knob changed from the base. Cumulative: knob after knob to the target.
    Total: base against target. Repeats: the largest spread of any configuration's repeats."""
    plan = attribution.plan
    table = FittedTable(
        title=f"What moves {plan.base.label()} to {plan.target.label()}",
        caption="alone: one knob changed from the base; cumulative: knob after knob towards "
        "the target; repeats: the largest difference between repeats of one configuration",
    )
    table.text("step")
    table.name("knob")
    table.text("change")
    table.text("compared")  # two labels, "cpu b1 r0 → cpu b64 r0": wrapped between words
    flips = flips_heading(attribution.cutoff, attribution.multiclass)
    for header in ("max ULP", "max |Δ|", "differing px", flips, "at risk"):
        table.figure(header)
    for kind in ("alone", "cumulative", "total"):
        table.add_section()
        for index, row in enumerate(attribution.of(kind)):
            compared = f"{row.compared[0]} → {row.compared[1]}"
            cells = (row.knob, row.change, compared)
            table.add_row(kind if index == 0 else "", *map(printable, cells), *_figures(row.effect))
    repeats = [row for row in attribution.of("repeats") if row.effect]
    if repeats:
        widest = max(repeats, key=lambda row: _size(row.effect))
        table.add_section()
        table.add_row(
            "repeats",
            "repeat",
            f"{len(repeats)} configuration{'' if len(repeats) == 1 else 's'}",
            printable(f"largest: {widest.compared[0]} → {widest.compared[1]}"),
            *_figures(widest.effect),
        )
    return table


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    if ("=" in args.from_) != ("=" in args.to):
        raise InputError(
            "explain", "--from and --to are both key=value specs, or both name cached runs"
        )
    cache = open_cache(args)
    status, failed, compared = EXIT_OK, False, ""
    if "=" in args.from_:
        model, images = model_and_images(args, "explain", "run SPECs on")
        request = request_of(
            args, model, images, cache, target=args.target, settings=model_settings(args)
        )
        start, end = configs_of([args.from_, args.to], model)  # an artefact's: its runtime
        session = AttributionSession(request, start, end, args.cutoff)
        outcome, matrix = run_matrix(args, err, session.request)
        status, failed = exit_code(outcome), bool(outcome.failed)
        records = [cache.read_run(r.key, with_map=False) for r in matrix.runs if cache.has(r.key)]
        attribution = session.measure(cache, records)
    else:
        if args.model or args.demo:
            raise InputError("explain", "give --from and --to as key=value specs to run a model")
        scan = cache.scan()
        report_damaged(err, scan.damaged)
        every = scan.records
        candidates = [
            r
            for group in comparable_groups(every, image=args.image, group=args.group)
            for r in group
        ]
        first, second, records = select_pair(every, candidates, args.from_, args.to)
        compared = compared_runs(first, second)
        attribution = measure_between(cache, records, first, second, args.cutoff)
    if args.json:
        _json({**attribution.to_dict(), **measured_on(records)})
        return status
    named, image = as_markup(records[0].study_model_name), as_markup(records[0].target_name)
    said = f": {as_markup(compared)}" if compared else ""
    out.print(f"[bold]{named}[/] on [bold]{image}[/]{said}", markup=True)
    out.print(attribution_table(attribution))
    how = " (give the model, images and key=value specs to compute it)"
    for line in attribution.sentences(failed, how if compared else ""):
        say(out, line)
    return status
