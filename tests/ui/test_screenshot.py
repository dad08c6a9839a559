"""The real window on a real (virtual) X display: start segdiff-gui on the demo results under
Xvfb, take a screenshot as a user would see it, keep it as an artefact and check what is on it."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import ImageGrab

pytestmark = pytest.mark.slow

ARTEFACTS = Path(__file__).parent.parent.parent / "artifacts"


@pytest.fixture
def display(tmp_path):
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (CI installs it: see .ci/run)")
    number = 90 + os.getpid() % 100
    server = subprocess.Popen(
        ["Xvfb", f":{number}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    yield f":{number}"
    server.terminate()
    server.wait(10)


def viridis_yellow(pixels):
    return (pixels[..., 0] > 200) & (pixels[..., 1] > 200) & (pixels[..., 2] < 90)


def test_the_first_screen_shows_the_demo(display, demo_cache, tmp_path):
    env = {
        **os.environ,
        "DISPLAY": display,
        "QT_QPA_PLATFORM": "xcb",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    app = subprocess.Popen(
        [sys.executable, "-m", "segdiff_gui.ui", "--cache", str(demo_cache.root), "--no-run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            time.sleep(1.0)
            shot = np.asarray(ImageGrab.grab(xdisplay=display).convert("RGB"))
            if viridis_yellow(shot).sum() > 5000 or time.monotonic() > deadline:
                break
        time.sleep(1.0)  # one more paint: titles and tables settle
        picture = ImageGrab.grab(xdisplay=display).convert("RGB")
        ARTEFACTS.mkdir(exist_ok=True)
        picture.save(ARTEFACTS / "gui-demo.png")
    finally:
        app.terminate()
        output = app.communicate(timeout=30)[0].decode(errors="replace")
    shot = np.asarray(picture)
    height, width, _ = shot.shape
    views = shot[:, width // 6 : width * 3 // 5]
    assert viridis_yellow(views).sum() > 5000, output  # the cells of ten probability maps
    purple = (
        (views[..., 0] > 50) & (views[..., 0] < 90) & (views[..., 2] > 70) & (views[..., 1] < 40)
    )
    assert purple.sum() > 50_000, output  # viridis' low end: the background of the maps
    menu = shot[:20, :300].mean(axis=(0, 1))
    assert menu.min() > 180  # a light menu bar: the window is there, not a black screen
