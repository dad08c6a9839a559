"""The subcommands are listed once (cli/commands.COMMANDS), each a module with its arguments and
its run; a command imports its own module, never the others'."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import segdiff_gui.cli.commands as commands
from segdiff_gui.cli.commands import COMMANDS, command_module
from segdiff_gui.cli.parser import build_parser, command_parser


def test_every_command_module_is_listed_once_and_has_its_arguments_and_run():
    modules = [command.module for command in COMMANDS]
    assert sorted(modules) == sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    assert len({command.name for command in COMMANDS}) == len(COMMANDS)
    for command in COMMANDS:
        module = command_module(command.name)
        assert module.DESCRIPTION and callable(module.arguments) and callable(module.run)
        parser = command_parser(command.name)
        assert parser is not None and parser.description == module.DESCRIPTION


def test_the_lazy_parser_parses_as_the_whole_one():
    argv = ["check", "--max-flips", "3", "--atol", "1e-5", "probs:1e-4", "--json"]
    assert build_parser(lazy=True).parse_args(argv) == build_parser().parse_args(argv)


def _command_modules_imported(*argv: str) -> list[str]:
    script = (
        "import json, sys\n"
        "from segdiff_gui.cli.main import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith("
        "'segdiff_gui.cli.commands.'))), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True
    )
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


def test_a_command_imports_its_own_module_and_no_other(tmp_path):
    assert _command_modules_imported("--version") == []
    assert _command_modules_imported("--help") == []
    assert _command_modules_imported("ls", "--cache", str(tmp_path)) == [
        "segdiff_gui.cli.commands.ls"
    ]
    assert _command_modules_imported("compare", "--help") == ["segdiff_gui.cli.commands.compare"]
