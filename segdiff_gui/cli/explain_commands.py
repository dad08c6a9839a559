"""``explain``, ``diagnose`` and ``sweep``: why maps differ, what it means at the cutoff, and
what it does to a whole test set."""

from __future__ import annotations

import argparse

from rich.console import Console

from segdiff_gui.cli.analysis_commands import context_of, runs_source, studies_of
from segdiff_gui.cli.running import exit_code, open_cache, report_damaged, request_of, run_matrix
from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_OK
from segdiff_gui.cli.sweep_view import print_sweep, sweep_session, write_csv
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import as_markup, say
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.analysis import flips_heading
from segdiff_gui.core.attribution import Attribution, Effect
from segdiff_gui.core.diagnosis import by_topic, diagnose
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import printable
from segdiff_gui.io.images import collect_images
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.arguments import configs_of, model_settings
from segdiff_gui.runner.explain import AttributionSession, compared_runs, measure_between
from segdiff_gui.runner.plan import check_model_path
from segdiff_gui.runner.reports import diagnosis_summary
from segdiff_gui.storage.selection import select_pair
from segdiff_gui.storage.studies import comparable_groups

__all__ = ["command_diagnose", "command_explain", "command_sweep"]


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


def command_explain(args: argparse.Namespace, out: Console, err: Console) -> int:
    if ("=" in args.from_) != ("=" in args.to):
        raise InputError(
            "explain", "--from and --to are both key=value specs, or both name cached runs"
        )
    cache = open_cache(args)
    status, failed, compared = EXIT_OK, False, ""
    if "=" in args.from_:
        if args.demo:
            model, images = demo_model(), demo_images()
        elif args.model:
            model, images = check_model_path(args.model), collect_images(args.images)
            if not images:
                raise InputError(args.model, "give the images after the model")
        else:
            raise InputError("explain", "name the model and images (or --demo) to run SPECs on")
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
        _json(
            {
                **attribution.to_dict(),
                "model": records[0].study_model_name,
                "image": records[0].target_name,
                "runs": {r.label: r.key for r in records},
            }
        )
        return status
    named, image = as_markup(records[0].study_model_name), as_markup(records[0].target_name)
    said = f": {as_markup(compared)}" if compared else ""
    out.print(f"[bold]{named}[/] on [bold]{image}[/]{said}", markup=True)
    out.print(attribution_table(attribution))
    how = " (give the model, images and key=value specs to compute it)"
    for line in attribution.sentences(failed, how if compared else ""):
        say(out, line)
    return status


def command_diagnose(args: argparse.Namespace, out: Console, err: Console) -> int:
    _, studies, where, damaged = studies_of(args)
    status = report_damaged(err, damaged)
    studies.sort(key=lambda pair: (pair.record.study_model_name, pair.record.target_name))
    if args.json:
        _json([diagnosis_summary(study, context_of(r, where)).to_dict() for study, r, _ in studies])
        return status
    if len(studies) > 1:
        say(
            out,
            f"{len(studies)} model/image groups, each diagnosed on its own (--image NAME or "
            "--group ID for one; 'segdiff sweep' summarises a whole test set).",
        )
    for study, _, title in studies:
        out.print(
            f"\n[bold]{as_markup(title)}[/], against {as_markup(study.reference.label)}",
            markup=True,
        )
        for heading, chosen in by_topic(diagnose(study)):
            out.print(f"[bold]{as_markup(heading)}[/]", markup=True)
            for finding in chosen:
                link = f" ({finding.link})" if finding.link else ""
                say(out, f"  • {finding.sentence}{link}")
                if finding.measure:
                    configs = " ".join(f"--config {spec}" for spec in finding.measure)
                    say(out, f"    measure it: segdiff run MODEL IMAGES {configs}")
    return status


def command_sweep(args: argparse.Namespace, out: Console, err: Console) -> int:
    store, records, _, damaged = runs_source(args)
    status = report_damaged(err, damaged)
    summary = sweep_session(args, store, records).summarise()
    write_csv(args, out, summary)
    if args.json:
        _json(summary.to_dict())
    else:
        print_sweep(summary, out)
    # Merged shards that are not the whole set: never a pass, whatever the figures say.
    return max(status, EXIT_FAILED_RUNS if summary.incomplete else EXIT_OK)
