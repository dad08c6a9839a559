"""``segdiff``: the headless front end. Runs matrices, lists and moves results, and never
imports TensorFlow itself (inference happens in engine children)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from segdiff_gui import __version__
from segdiff_gui.cli import commands
from segdiff_gui.core.config import ConfigError
from segdiff_gui.core.errors import InputError

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One clear line and exit 2, as for every other input error.
        self.exit(
            EXIT_USAGE, f"segdiff: {message} (see 'segdiff {self.prog.split()[-1]} --help')\n"
        )


def _common(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
    parser.add_argument(
        "--cache",
        metavar="PATH",
        help="result cache folder (default: $SEGDIFF_CACHE or the user cache dir)",
    )
    if json_flag:
        parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def _matrix_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help="runs of each configuration (default 2)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="kill a child that reports nothing for S seconds (default 600)",
    )
    parser.add_argument(
        "--cutoff",
        type=float,
        default=0.5,
        metavar="T",
        help="class cutoff for the flip counts in the summary (default 0.5)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="segdiff",
        description=(
            "See which pixels of a segmentation model's probability map change with the device, "
            "batch size, precision or the next run."
        ),
    )
    parser.add_argument("--version", action="version", version=f"segdiff {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    devices = sub.add_parser("devices", help="devices TensorFlow sees and its build (in a child)")
    _common(devices)

    run = sub.add_parser(
        "run",
        help="run a model on images under a configuration matrix",
        description="Run MODEL on the target image under each --config "
        "(default: batch 1 and 64 on every device), caching every map.",
    )
    run.add_argument("model", help=".keras, legacy .h5, or a SavedModel folder")
    run.add_argument("images", nargs="+", help="image files or folders (PNG, JPEG, TIFF, NPY)")
    run.add_argument("--target", metavar="NAME", help="the image to study (default: the first)")
    run.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="SPEC",
        help=(
            "comma-separated key=value: device=cpu|gpu:N, batch=N, context=set|copies, position=K, "
            "determinism=on|off, tf32=on|off, onednn=on|off, threads=N, xla=on|off, "
            "precision=float32|mixed_bfloat16|mixed_float16; repeatable"
        ),
    )
    _matrix_options(run)
    run.add_argument("--scale", metavar="X", help="input scale, e.g. 1/255 (default: by dtype)")
    run.add_argument("--mean", metavar="M[,M,M]", help="per-channel mean subtracted after scaling")
    run.add_argument("--std", metavar="S[,S,S]", help="per-channel std divided after the mean")
    run.add_argument(
        "--color",
        choices=("keep", "gray", "rgb"),
        default="keep",
        help="convert channels only when asked (default keep)",
    )
    run.add_argument(
        "--resize",
        choices=("refuse", "bilinear"),
        default="refuse",
        help="what to do when the image size differs from the model's (default refuse)",
    )
    run.add_argument("--output", metavar="NAME|INDEX", help="which output of a multi-output model")
    run.add_argument(
        "--activation",
        choices=("none", "sigmoid", "softmax"),
        default="none",
        help="apply to raw logits (default none: outputs must be probabilities)",
    )
    run.add_argument(
        "--trust-model",
        action="store_true",
        help="allow Python code in the model file (turns Keras safe mode off)",
    )
    _common(run)

    listing = sub.add_parser("ls", help="list the runs in the cache")
    _common(listing)

    demo = sub.add_parser(
        "demo", help="run the bundled demo's matrix and summarise the differences"
    )
    _matrix_options(demo)
    _common(demo)

    bundle = sub.add_parser("bundle", help="write chosen runs to one portable .h5 file")
    bundle.add_argument("out", help="bundle file to write (.h5)")
    bundle.add_argument("runs", nargs="*", help="run ids (prefixes) or labels (default: all)")
    _common(bundle)

    merge = sub.add_parser("merge", help="add the runs of bundles to the cache")
    merge.add_argument("bundles", nargs="+", help="bundle files made by 'segdiff bundle'")
    _common(merge)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Piped output (CI logs, files) gets wide tables instead of 80-column wrapping.
    # Piped output (CI logs, files) gets wide tables instead of 80 columns; sentences never wrap.
    width = None if sys.stdout.isatty() else 160
    stdout = Console(highlight=False, soft_wrap=True, width=width)
    stderr = Console(stderr=True, highlight=False, soft_wrap=True, width=width)
    handler = getattr(commands, f"command_{args.command}")
    try:
        return int(handler(args, stdout, stderr))
    except (InputError, ConfigError) as error:
        if args.debug:
            raise
        print(f"segdiff: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("segdiff: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - a crash is reported in one line unless --debug
        if args.debug:
            raise
        print(
            f"segdiff: internal error: {type(error).__name__}: {error} (rerun with --debug)",
            file=sys.stderr,
        )
        return EXIT_FAILED_RUNS


if __name__ == "__main__":
    sys.exit(main())
