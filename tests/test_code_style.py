"""ruff (lint and format) on every tree, and mypy's configuration naming every room strictly.
mypy itself runs in CI beside the tests (``.ci/checks/test_types.py``): its 40-odd seconds of
one core are not in the test command's time."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
BIN = Path(sys.executable).parent
CHECKED = ("segdiff_gui", "tests", "resources", "packaging", "examples", ".ci/checks")


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_lint_and_format():
    lint = run(str(BIN / "ruff"), "check", *CHECKED)
    assert lint.returncode == 0, lint.stdout
    formatted = run(str(BIN / "ruff"), "format", "--check", *CHECKED)
    assert formatted.returncode == 0, formatted.stdout


ROOMS = ("core", "storage", "io", "runner", "engine", "cli", "api", "ui")


def test_mypy_checks_every_room_strictly():
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    assert {f"segdiff_gui/{room}" for room in ROOMS} <= set(mypy["files"])
