"""``segdiff diagnose``: is this normal, why, and how to avoid it, from the measured runs."""

from __future__ import annotations

import argparse

from rich.console import Console

from segdiff_gui.cli.parser_parts import (
    common,
    selection,
)
from segdiff_gui.cli.running import (
    report_damaged,
)
from segdiff_gui.cli.stored_runs import context_of, studies_of
from segdiff_gui.cli.text import as_markup, say
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.core.diagnosis import by_topic, diagnose
from segdiff_gui.runner.reports import diagnosis_summary

DESCRIPTION = (
    "Plain sentences built only from what the cached runs measured: whether each configuration "
    "is deterministic, which knobs change the maps and by how much, flips and at-risk pixels at "
    "the cutoff, and the ways to avoid them that the measurements support, with links to "
    "TensorFlow's documentation."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    selection(parser)
    common(parser, "print the findings as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
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
