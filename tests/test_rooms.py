"""The rooms of DESIGN.md, enforced: layering by import-linter, and no TensorFlow in the
processes that users start (the CLI and, later, the GUI)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    result = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken" in result.stdout
    assert "The window's models import no Qt" in result.stdout


def test_cli_help_and_every_front_room_import_without_tensorflow():
    code = (
        "import sys\n"
        "import segdiff_gui.cli.main as m, segdiff_gui.runner, segdiff_gui.storage, "
        "segdiff_gui.io, segdiff_gui.core, segdiff_gui.resources\n"
        "try:\n    m.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "bad = [n for n in ('tensorflow', 'keras', 'tf_keras') if n in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "usage: segdiff" in result.stdout


def test_the_gui_window_appears_without_tensorflow(fake_demo_cache):
    code = (
        "import sys\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from segdiff_gui.ui.app import build_window\n"
        f"window, _ = build_window(['--cache', {str(fake_demo_cache.root)!r}, '--no-run'])\n"
        "window.show(); app.processEvents()\n"
        "assert window.model.runs, 'no runs shown'\n"
        "bad = [n for n in ('tensorflow', 'keras', 'tf_keras') if n in sys.modules]\n"
        "assert not bad, bad\n"
        "print('shown', len(window.model.runs))\n"
        "window.close()\n"  # as a user ends: the window waits for its threads
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.returncode == 0, result.stderr
    assert "shown 10" in result.stdout


def _imports_of_every_module() -> dict[str, set[str]]:
    """Each module of segdiff_gui (a package as its own name) and the segdiff_gui modules it
    imports, type-checking and function-level imports included."""
    import ast

    modules: dict[str, set[str]] = {}
    for path in (ROOT / "segdiff_gui").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("segdiff_gui"):
                imported |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name.startswith("segdiff_gui")}
        modules[name] = imported
    return {
        name: {m for m in found if m in modules and m != name} for name, found in modules.items()
    }


def test_no_import_circle_in_any_room():
    """No module imports one that imports it back, in any room (type-checking and
    function-level imports included): the engine's probes take a narrow context instead of
    the run loop that calls them, widgets the model or a narrow interface."""
    imports = _imports_of_every_module()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for name in imports.get(start, ()):
            if name == goal or (name not in seen and reaches(name, goal, seen | {name})):
                return True
        return False

    # The root package re-exports the API on first use (a lazy import in __getattr__), and
    # imports nothing of it at once: it is the front door, not a room.
    circles = sorted(
        name for name in imports if name != "segdiff_gui" and reaches(name, name, {name})
    )
    assert circles == []


def test_no_module_imports_the_package_s_front_door():
    """The root package is the API's front door, above every room: a module that imports it
    (for its version, say) is an arrow up, outside every contract."""
    import ast

    upward = []
    for path in sorted((ROOT / "segdiff_gui").rglob("*.py")):
        if path == ROOT / "segdiff_gui" / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "segdiff_gui":
                upward += [f"{path.relative_to(ROOT)}: {alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                upward += [
                    f"{path.relative_to(ROOT)}: import {alias.name}"
                    for alias in node.names
                    if alias.name == "segdiff_gui"
                ]
    assert upward == []
