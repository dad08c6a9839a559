"""The test-set sweep for people: a table per configuration, the images with most flips, and
what the numbers mean for a reported mean Dice."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.console import Console

from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import say
from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.sweep import SweepHints, SweepSummary, sweep_sentences
from segdiff_gui.core.text import printable
from segdiff_gui.io.tables import write_sweep_csv
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.runner.sweeps import SweepSession
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore

__all__ = ["print_sweep", "sweep_session", "write_csv"]


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


# How the command line asks for what a sweep did not measure.
_HOW = SweepHints(masks="--masks FOLDER", repeats="--repeats 2 or more")


def print_sweep(summary: SweepSummary, out: Console, shown: int = 10) -> None:
    """The test-set table, the images with most flips, and what it means for a reported mean."""
    rows = summary.rows()
    cutoff = at_cutoff(summary.cutoff, summary.multiclass)
    table = FittedTable(
        title=f"Test set: {summary.images_text()} against {summary.reference} {cutoff}"
    )
    table.name("configuration")
    headers = ["images", "with flips", "flips", "at risk", "max ULP"]
    if summary.has_truth:
        headers += ["with truth", "mean Dice", "Δ Dice", "Dice range (repeats)", "mean IoU"]
        headers += ["Δ IoU"]
    for header in headers:
        if header.startswith("Δ"):  # "+0.00e+00 over 1 of 4 images": wrapped between words
            table.text(header, justify="right")
        else:
            table.figure(header)
    for row in rows:
        cells = [
            f"{row['images']:,}" + (f"/{len(summary.images):,}" if row["partial"] else ""),
            f"{row['images_with_flips']:,}",
            f"{row['flips']:,}",
            f"{row['at_risk']:,}",
            f"{row['max_ulp']:,}",
        ]
        if summary.has_truth:
            cells += [
                f"{row['truth_images']:,}",
                _percent(row["mean_dice"]),
                summary.delta_text(row),
                "—" if row["dice_repeat_range"] is None else f"{row['dice_repeat_range']:.2e}",
                _percent(row["mean_iou"]),
                summary.delta_text(row, "iou"),
            ]
        name = row["configuration"] + (" (reference)" if row["is_reference"] else "")
        table.add_row(printable(name), *cells)
    out.print(table)
    worst = sorted(
        summary.images,
        key=lambda image: -sum(e.effect.flips for e in image.configurations.values()),
    )[:shown]
    if worst and any(e.effect.flips for e in worst[0].configurations.values()):
        per_image = FittedTable(title=f"Images with the most flips (first {len(worst)})")
        per_image.name("image")
        names = summary.configurations
        for name in names:
            per_image.figure(name)
        for image in worst:
            per_image.add_row(
                printable(image.image),
                *[
                    f"{image.configurations[n].effect.flips:,}" if n in image.configurations else ""
                    for n in names
                ],
            )
        out.print(per_image)
    for line in sweep_sentences(summary, _HOW):
        say(out, line)


def sweep_session(
    args: argparse.Namespace,
    store: RunStore,
    runs: Sequence[RunRecord] = (),
    request: MatrixRequest | None = None,
) -> SweepSession:
    """The sweep the arguments ask for (model, group, reference, masks) of the stored ``runs``,
    or of ``request`` run on every image first (its masks checked before anything runs)."""
    return SweepSession(
        store,
        cutoff=args.cutoff,
        runs=runs,
        request=request,
        reference=args.ref_configuration or None,  # a run or a configuration, as everywhere
        masks=args.masks or None,
        model=args.model_name,
        group=getattr(args, "group", None),
    )


def write_csv(args: argparse.Namespace, out: Console, summary: SweepSummary) -> None:
    """Every image × configuration's figures into ``--csv``'s file, if one is given."""
    if args.csv:
        count = write_sweep_csv(args.csv, summary)
        if not args.json:
            say(out, f"wrote {_plural(count, 'line')} (image × configuration) to {args.csv}")
