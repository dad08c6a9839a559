"""Your own pipeline's maps: ``segdiff import`` brings them into the cache as runs marked
imported; ``segdiff reproduce`` finds the configuration that computes one bit for bit."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from segdiff_gui.cli.running import open_cache, request_of
from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.run_words import run_command
from segdiff_gui.cli.text import say
from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.reproduce import Reproduction
from segdiff_gui.core.text import shape_text
from segdiff_gui.io.images import collect_images
from segdiff_gui.io.maps import open_maps
from segdiff_gui.runner.arguments import model_settings
from segdiff_gui.runner.imports import ImportRequest, import_maps
from segdiff_gui.runner.plan import check_model_path
from segdiff_gui.runner.reproduce import ReproduceSearch, reproduce

__all__ = ["command_import", "command_reproduce"]

EXIT_NOT_REPRODUCED = 1


def _notes(texts: list[str]) -> tuple[tuple[str, str], ...]:
    notes = []
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InputError("--note", f"{text[:40]!r} is not KEY=VALUE")
        notes.append((key.strip(), value.strip()))
    return tuple(notes)


def command_import(args: argparse.Namespace, out: Console, err: Console) -> int:
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


def command_reproduce(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    model = check_model_path(args.model)
    images = collect_images(args.images)
    maps = open_maps(args.map)
    settings = model_settings(args)
    request = request_of(args, model, images, cache, target=args.target, settings=settings)
    base = parse_config_spec(args.config) if args.config else RunConfig()
    search = ReproduceSearch(maps, request, str(args.map), base)

    def said(text: str) -> None:
        if not args.json:
            say(err, text)

    answer = reproduce(search, lambda runner: drive(runner, err, quiet=args.json), said)
    return _report(args, out, answer, search)


def _report(args: argparse.Namespace, out: Console, answer: Reproduction,
            search: ReproduceSearch) -> int:  # fmt: skip
    match = answer.match
    # The very request the matching run was made by: a cache hit, every setting said.
    again = run_command(search.request_for([match.candidate])) if match else ""
    if args.json:
        out.print_json(
            json.dumps(
                {
                    "sentence": answer.sentence(),
                    "match": match.label if match else None,
                    "command": again or None,
                    "varied": list(answer.varied),
                    "not_varied": list(answer.not_varied),
                    "failed": list(answer.failed),
                    "trials": [
                        {"label": t.label, "changes": list(t.candidate.changes), "key": t.key,
                         "differing_pixels": t.differing, "max_ulp": t.max_ulp}
                        for t in answer.trials
                    ],
                }
            )
        )  # fmt: skip
        return EXIT_OK if match else EXIT_NOT_REPRODUCED
    say(out, answer.sentence() + ".")
    if match:
        say(out, f"The same run again (from the cache): {again}")
        return EXIT_OK
    say(out, f"Varied: {'; '.join(answer.varied)}.")
    say(out, f"Not varied: {'; '.join(answer.not_varied)}.")
    for failure in answer.failed:
        say(out, f"could not run {failure}")
    return EXIT_NOT_REPRODUCED
