"""mypy strict on every room (the engine's calls into its untyped runtimes are allowed, and
pyqtgraph, untyped, is Any to the window): run by ``.ci/run`` after README's test command,
outside it (``tests/test_code_style.py`` checks that the configuration names every room)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_strict_on_the_rooms_it_names():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout
