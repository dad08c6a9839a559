"""``segdiff``: the headless front end. Runs matrices, lists and moves results, and never
imports TensorFlow itself (inference happens in engine children)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from segdiff_gui.cli.commands import command_module
from segdiff_gui.cli.exit_codes import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from segdiff_gui.cli.hints import with_flag
from segdiff_gui.cli.parser import build_parser
from segdiff_gui.cli.text import TerminalConsole
from segdiff_gui.core.config import ConfigError
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import printable

__all__ = ["build_parser", "main"]


def _width() -> int | None:
    """The width tables are laid out for: a terminal's own (rich reads it, or $COLUMNS); piped
    output's (CI logs, files) is $COLUMNS where set, else 160 rather than rich's 80. Sentences
    never wrap."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else 160


def main(argv: Sequence[str] | None = None) -> int:
    # Only the chosen command's module is imported: a cache hit of ``segdiff run`` is mostly
    # Python start-up, and modules it never uses would be a good part of it.
    args = build_parser(lazy=True).parse_args(argv)
    width = _width()
    stdout = TerminalConsole(highlight=False, soft_wrap=True, width=width)
    stderr = TerminalConsole(stderr=True, highlight=False, soft_wrap=True, width=width)
    handler = command_module(args.command).run
    try:
        return int(handler(args, stdout, stderr))
    except (InputError, ConfigError) as error:
        if args.debug:
            raise
        fix = error.fix if isinstance(error, InputError) else ""
        print(f"segdiff: {printable(with_flag(str(error), fix, args.command))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader (``head``, a closed pager) left: not an error of ours, and nothing to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as error:
        if args.debug:
            raise
        where = f"{error.filename}: " if error.filename else ""
        print(f"segdiff: {printable(where + str(error.strerror or error))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("segdiff: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - a crash is reported in one line unless --debug
        if args.debug:
            raise
        print(
            f"segdiff: internal error: {type(error).__name__}: {error} (rerun with --debug)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
