"""Every ``segdiff`` subcommand, listed once: its name, its module and its line of help.

A command's module (``segdiff_gui.cli.commands.<module>``) holds that command alone: its
``DESCRIPTION`` and ``EPILOG``, ``arguments(parser)`` adding its options (the groups several
commands share are in ``cli/parser_parts.py``) and ``run(args, out, err)`` returning the exit
code. What several commands show or compute stays in the modules named for it (``running``,
``stored_runs``, ``summary``, ``tables``, ``sweep_view``, ``slurm_script``). A module is
imported only when its command is parsed or run (``cli/parser.build_parser``): ``segdiff ls``
never loads a matrix's runner, and ``segdiff --help`` reads this table alone."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    import argparse

    from rich.console import Console

__all__ = ["COMMANDS", "Command", "CommandModule", "command_module"]


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # under segdiff_gui.cli.commands
    help: str


# In the order ``segdiff --help`` and the CLI reference list them.
COMMANDS = (
    Command(
        "devices",
        "devices",
        "devices each installed runtime sees, and its build (asked of child processes)",
    ),
    Command("run", "run", "run a model on images under a configuration matrix"),
    Command("ls", "ls", "list the runs in the cache"),
    Command("demo", "demo", "run the bundled demo's matrix and summarise the differences"),
    Command("bundle", "bundle", "write chosen runs to one portable .h5 file"),
    Command("merge", "merge", "add the runs of bundles to the cache"),
    Command("import", "imports", "bring maps from your own pipeline into the cache"),
    Command(
        "reproduce", "reproduce", "find the configuration that computes your own map bit for bit"
    ),
    Command("compare", "compare", "every run against a reference: differences, flips, determinism"),
    Command("export", "export", "write the flip mask and the flipped pixels of two runs"),
    Command("report", "report", "a self-contained HTML and/or JSON report for a bug report"),
    Command(
        "check", "check", "exit 1 when any run exceeds a bound against the reference (CI gate)"
    ),
    Command(
        "explain", "explain", "attribute a difference to knobs: one at a time, and cumulatively"
    ),
    Command(
        "diagnose", "diagnose", "is this normal, why, and how to avoid it — from the measured runs"
    ),
    Command("sweep", "sweep", "a whole test set from the cache: per-image figures, Dice and IoU"),
    Command(
        "layers",
        "layers",
        "where in the network two configurations part: every layer's output compared",
    ),
    Command(
        "repair",
        "repair",
        "the layers to keep in float32 so that a reduced precision stops flipping pixels",
    ),
    Command(
        "slurm-script",
        "slurm_script",
        "write a Slurm array job that sweeps a test set in shards, then merge and sweep",
    ),
)

_MODULES = {command.name: command.module for command in COMMANDS}


class CommandModule(Protocol):
    """What a command's module defines."""

    DESCRIPTION: str
    EPILOG: str | None

    def arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, out: Console, err: Console) -> int: ...


def command_module(name: str) -> CommandModule:
    """The module of the command ``name`` (``slurm-script``), imported now."""
    return cast(CommandModule, importlib.import_module(f"{__name__}.{_MODULES[name]}"))
