"""The Linux desktop entry and AppStream metadata pass their validators; the icons exist at
every size the install script puts into the hicolor theme; one version everywhere."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import segdiff_gui
from segdiff_gui.resources import APP_ID, icon_path

LINUX = Path(__file__).resolve().parents[2] / "packaging" / "linux"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):  # CI installs it: missing there is a failure, not a skip
            pytest.fail(f"{name} is not installed")
        pytest.skip(f"{name} is not installed (apt-get install desktop-file-utils appstream)")
    return found


def test_the_desktop_entry_validates():
    entry = LINUX / f"{APP_ID}.desktop"
    result = subprocess.run([_tool("desktop-file-validate"), entry], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout
    text = entry.read_text()
    assert f"Icon={APP_ID}" in text and "Exec=segdiff-gui %F" in text


def test_the_appstream_metadata_validates_offline():
    metainfo = LINUX / f"{APP_ID}.metainfo.xml"
    result = subprocess.run(
        [_tool("appstreamcli"), "validate", "--no-net", metainfo], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = metainfo.read_text()
    assert f'<launchable type="desktop-id">{APP_ID}.desktop</launchable>' in text
    assert f'<release version="{segdiff_gui.__version__}"' in text  # release notes of this one
    assert '<screenshot type="default">' in text and (LINUX / "screenshot.png").is_file()


def test_the_install_script_puts_every_file_where_desktops_look(tmp_path):
    subprocess.run([LINUX / "install.sh", tmp_path], check=True, capture_output=True)
    assert (tmp_path / "applications" / f"{APP_ID}.desktop").is_file()
    assert (tmp_path / "metainfo" / f"{APP_ID}.metainfo.xml").is_file()
    assert (tmp_path / "icons/hicolor/scalable/apps" / f"{APP_ID}.svg").is_file()
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        png = tmp_path / f"icons/hicolor/{size}x{size}/apps/{APP_ID}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert icon_path(size).read_bytes() == png.read_bytes()
    subprocess.run([LINUX / "install.sh", "--uninstall", tmp_path], check=True, capture_output=True)
    assert not (tmp_path / "applications" / f"{APP_ID}.desktop").exists()


def test_one_version_everywhere():
    version = segdiff_gui.__version__
    for command in (["segdiff_gui.cli", "--version"], ["segdiff_gui.ui", "--version"]):
        result = subprocess.run(
            [sys.executable, "-m", *command], capture_output=True, text=True, check=True
        )
        assert result.stdout.strip().endswith(version)
    pyproject = (LINUX.parents[1] / "pyproject.toml").read_text()
    assert 'version = {attr = "segdiff_gui.version.__version__"}' in pyproject
    assert not re.search(r'^version\s*=\s*"', pyproject, re.MULTILINE)  # no second copy
