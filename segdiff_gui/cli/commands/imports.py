"""``segdiff import``: maps from your own pipeline brought into the cache, checked and marked
imported."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    common,
)
from segdiff_gui.cli.running import (
    open_cache,
)
from segdiff_gui.cli.text import say
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import shape_text
from segdiff_gui.io.images import collect_images
from segdiff_gui.runner.arguments import (
    add_model_settings,
    model_settings,
)
from segdiff_gui.runner.imports import ImportRequest, import_maps
from segdiff_gui.runner.plan import check_model_path

DESCRIPTION = (
    "Check MAPS (.npy, .npz, float TIFF; one map, or a batch N×H×W[×C] of the images in order) "
    "against the map MODEL gives, and store each as a run marked imported: compare, diagnose, "
    "the window and reports then show it beside segdiff's runs. What you state (--label, "
    "--note) is shown as stated, never as measured."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("maps", help="the map file")
    parser.add_argument("--model", required=True, help="the model that made the maps")
    parser.add_argument(
        "--image", action="append", required=True, metavar="IMAGE",
        help="the image a map was made of (repeat, in the order of a batch's maps)",
    )  # fmt: skip
    parser.add_argument("--label", metavar="TEXT", help="what to call it (default: file name)")
    parser.add_argument(
        "--note", action="append", default=[], metavar="KEY=VALUE",
        help="what you know of where it came from (device=A100 …); repeatable",
    )  # fmt: skip
    add_model_settings(parser)
    common(parser, "print what was imported as JSON")


def _notes(texts: list[str]) -> tuple[tuple[str, str], ...]:
    notes = []
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InputError("--note", f"{text[:40]!r} is not KEY=VALUE")
        notes.append((key.strip(), value.strip()))
    return tuple(notes)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    request = ImportRequest(
        maps=Path(args.maps),
        model=check_model_path(args.model),
        images=tuple(collect_images(args.image)),
        cache=cache,
        settings=model_settings(args),
        label=args.label or "",
        notes=_notes(args.note),
    )
    done = import_maps(request)
    if args.json:
        rows = [
            {"id": d.record.short_id, "key": d.record.key, "label": d.record.label,
             "image": d.record.target_name, "added": d.added, "rounded": d.rounded}
            for d in done
        ]  # fmt: skip
        out.print_json(json.dumps(rows))
        return EXIT_OK
    for item in done:
        record = item.record
        what = "imported" if item.added else "already in the cache"
        say(
            out,
            f"{what}: {record.short_id} {record.label} on {record.target_name} "
            f"({shape_text(record.map_shape)} {record.kind})",
        )
        if item.rounded:
            out.print("  its float64 values were rounded to float32", markup=False)
    return EXIT_OK
