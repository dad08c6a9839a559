"""``segdiff-gui --smoke-test`` (the check an installed wheel or a bundle runs) and the icon."""

import subprocess
import sys

import pytest

from segdiff_gui.resources import icon_path

pytestmark = pytest.mark.slow


def test_the_smoke_test_runs_one_inference_in_a_child_and_exits_0(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "segdiff_gui.ui", "--smoke-test"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "smoke test passed: cpu b1 r0 computed by an engine child" in result.stdout


def test_the_window_uses_the_app_icon(window_for, fake_demo_cache):
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from segdiff_gui.resources import APP_ID
    from segdiff_gui.ui.app import configure_application

    app = QApplication.instance()
    app.setWindowIcon(QIcon())  # start from none, as a fresh application does
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    assert window.windowIcon().isNull()
    configure_application(app)
    assert not window.windowIcon().isNull()
    assert window.windowIcon().availableSizes() or icon_path().suffix == ".svg"
    assert app.desktopFileName() == APP_ID
