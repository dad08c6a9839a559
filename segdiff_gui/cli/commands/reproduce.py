"""``segdiff reproduce``: the configuration that computes your own map bit for bit."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    common,
)
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.run_words import run_command
from segdiff_gui.cli.running import (
    open_cache,
    request_of,
)
from segdiff_gui.cli.text import say
from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.reproduce import Reproduction
from segdiff_gui.io.images import collect_images
from segdiff_gui.io.maps import open_maps
from segdiff_gui.runner.arguments import (
    add_model_settings,
    add_timeout,
    model_settings,
)
from segdiff_gui.runner.plan import check_model_path
from segdiff_gui.runner.reproduce import ReproduceSearch, reproduce

DESCRIPTION = (
    "Run MODEL on the images under the configurations your pipeline may differ in (the runtime: "
    "Keras 3 or, for a .h5, Keras 2; each that runs an artefact; oneDNN, model.predict's batch, "
    "XLA, threads, dividing or multiplying by 255): every runtime's defaults first, then one "
    "knob at a time, then pairs, each an ordinary cached run, until one equals MAP bit for bit. "
    "Exit 0 when one does, 1 when none does."
)
EPILOG = parser_parts.EPILOG

EXIT_NOT_REPRODUCED = 1


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("map", help="your map of the target (.npy, .npz, float TIFF)")
    parser.add_argument("model", help="the model that made it")
    parser.add_argument("images", nargs="+", help="the images, in your pipeline's order")
    parser.add_argument("--target", metavar="NAME", help="the image MAP is of (default: first)")
    parser.add_argument(
        "--config",
        metavar="SPEC",
        help="where the search starts (default: the defaults, under every runtime the model "
        "runs under), e.g. runtime=jax for a pipeline on Keras's JAX backend",
    )
    add_model_settings(parser)
    add_timeout(parser)
    common(parser, "print every configuration tried and the answer as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
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
        out.print_json(json.dumps({**answer.to_dict(), "command": again or None}))
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
