"""The documentation: README stays a five-minute read whose commands are true, the site builds
with ``mkdocs build --strict`` (a broken link, a missing page or an API name without its
reference entry fails), and the window's system libraries are one list that README, the
installation page and CI all read."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APT_LIST = "packaging/apt-packages.txt"


def _words_before(text: str, needle: str) -> int:
    return len(text[: text.index(needle)].split())


def test_readme_is_short_and_answers_the_three_questions_first():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 10 * 1024
    assert _words_before(readme, "segdiff-gui") <= 250  # the demo in the window
    assert _words_before(readme, "segdiff demo") <= 250  # and headless
    for question, command in [
        ("**Is it normal?**", "segdiff diagnose"),
        ("**Why?**", "segdiff explain"),
        ("**Which answer is right?**", "precision=float64"),
    ]:
        assert _words_before(readme, question) < _words_before(readme, command) <= 1000


def test_readme_links_only_to_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert "docs/installation.md" in targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing


def test_the_window_libraries_are_one_list_that_readme_the_docs_and_ci_read():
    """README's apt list lacked the xcb libraries CI installed, so the first command
    did not open the window on a fresh Debian machine."""
    packages = (ROOT / APT_LIST).read_text().split()
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", name) for name in packages)
    # What Qt's xcb platform plugin loads beyond libxcb itself (ldd of PySide6's libqxcb.so).
    assert {
        "libxcb-cursor0", "libxcb-icccm4", "libxcb-image0", "libxcb-keysyms1", "libxcb-randr0",
        "libxcb-render-util0", "libxcb-shape0", "libxcb-xkb1", "libxkbcommon-x11-0",
        "libegl1", "libfontconfig1", "libdbus-1-3",
    } <= set(packages)  # fmt: skip
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert f"$(cat {APT_LIST})" in first_block and "segdiff-gui" in first_block
    assert f'--8<-- "{APT_LIST}"' in (ROOT / "docs" / "installation.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"$(cat {APT_LIST})" in ci
    # The window on the real platform, not offscreen: a missing library fails CI.
    assert re.search(r"^QT_QPA_PLATFORM=xcb xvfb-run .*segdiff-gui --smoke-test$", ci, re.M)


def test_architecture_is_short_and_names_only_files_that_exist():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert len(text.encode()) <= 16 * 1024
    paths = set(re.findall(r"`([a-z_./]+/[a-z_]+\.(?:py|md|toml))", text))
    assert "core/knobs.py" in paths
    missing = [
        path for path in paths
        if not (ROOT / path).exists() and not (ROOT / "segdiff_gui" / path).exists()
    ]  # fmt: skip
    assert not missing


def test_every_picture_is_one_the_window_renders_and_one_a_page_shows():
    """The docs never show a picture the current code would not draw: each PNG under
    docs/images is one that tools/render_screenshots.py takes of the window, and is shown."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("shots", ROOT / "tools/render_screenshots.py")
    assert spec and spec.loader
    shots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shots)
    stored = sorted(path.stem for path in (ROOT / "docs" / "images").iterdir())
    assert stored == sorted(shots.PICTURES)
    pages = [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    shown = set(re.findall(r"images/([\w-]+)\.png\)", " ".join(p.read_text() for p in pages)))
    assert shown == set(stored)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.slow  # a few seconds: the API reference is read from the sources
def test_the_site_builds_strictly_with_every_api_name_and_command(tmp_path):
    from segdiff_gui import api
    from segdiff_gui.cli.parser import build_parser

    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "NO_MKDOCS_2_WARNING": "1",
    }
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (site / "reference" / "api" / "index.html").read_text()
    absent = [name for name in api.__all__ if f'id="segdiff_gui.api.{name}"' not in reference]
    assert not absent
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for name, parser in _subcommands(build_parser()).items():
        assert f'id="{name}"' in cli
        assert all(option in cli for option in parser._option_string_actions), name
    installation = (site / "installation" / "index.html").read_text()
    assert all(name in installation for name in (ROOT / APT_LIST).read_text().split())
