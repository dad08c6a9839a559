"""The ``segdiff`` command line's parser: the commands of ``cli/commands``, each with the options
its module adds."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import cache
from typing import Any, cast

from segdiff_gui.cli.commands import COMMANDS, command_module
from segdiff_gui.cli.parser_parts import EPILOG, Parser
from segdiff_gui.version import __version__

__all__ = ["build_parser", "command_flags", "command_options", "command_parser"]


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands, each listed with its help; a command's options are added (and its module
    imported) when it is chosen, or when :meth:`fill` asks for them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._filled: set[str] = set()

    def fill(self, name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self.choices[name]
        if name not in self._filled:
            self._filled.add(name)
            module = command_module(name)
            parser.description = module.DESCRIPTION
            parser.epilog = module.EPILOG
            module.arguments(parser)
        return parser

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if values and values[0] in self.choices:
            self.fill(values[0])
        super().__call__(parser, namespace, values, option_string)


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """``segdiff``'s parser, every command's options in it (``--help``, the CLI reference), or,
    ``lazy``, only the options of the command that is parsed (``main``: a command imports its
    own module, never the others')."""
    parser = Parser(
        prog="segdiff",
        description="See which pixels of a segmentation model's probability map change with "
        "the device, batch size, precision or the next run.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"segdiff {__version__}")
    parser.add_argument("--cache", metavar="PATH", default=None, help=argparse.SUPPRESS)
    sub = cast(
        _Commands,
        parser.add_subparsers(dest="command", required=True, parser_class=Parser, action=_Commands),
    )
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.help)
    if not lazy:
        for command in COMMANDS:
            sub.fill(command.name)
    return parser


def command_parser(command: str) -> argparse.ArgumentParser | None:
    """The parser of ``segdiff COMMAND`` with its options (None: no such command)."""
    for action in build_parser(lazy=True)._actions:
        if isinstance(action, _Commands) and command in action.choices:
            return action.fill(command)
    return None


@cache
def command_options(command: str) -> frozenset[str]:
    """Every option string ``segdiff COMMAND`` takes (``--group``, ``-h``, …)."""
    parser = command_parser(command)
    return frozenset(parser._option_string_actions) if parser else frozenset()


@cache
def command_flags(command: str) -> dict[str, str]:
    """The flag of each option ``segdiff COMMAND`` takes, by its destination (``trust_model``
    → ``--trust-model``): a command written back from a request names options as the
    parser spells them."""
    parser = command_parser(command)
    actions = parser._actions if parser else []
    return {a.dest: max(a.option_strings, key=len) for a in actions if a.option_strings}
