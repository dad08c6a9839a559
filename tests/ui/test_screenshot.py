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
    # The window is centred on the bare X screen (no window manager); find it by its light
    # frame and menu bar, then look only inside it.
    light_rows = np.flatnonzero((shot.mean(axis=2) > 180).sum(axis=1) > 200)
    light_columns = np.flatnonzero((shot.mean(axis=2) > 180).sum(axis=0) > 200)
    assert light_rows.size and light_columns.size, output  # a window, not a black screen
    top, left = light_rows[0], light_columns[0]
    window = shot[top : light_rows[-1] + 1, left : light_columns[-1] + 1]
    assert window.shape[1] > 1000, output  # most of the 1600-pixel screen
    menu = window[:20, :300].mean(axis=(0, 1))
    assert menu.min() > 180, output  # a light menu bar at the window's top left
    assert viridis_yellow(window).sum() > 5000, output  # the cells of ten probability maps
    purple = (
        (window[..., 0] > 50)
        & (window[..., 0] < 90)
        & (window[..., 2] > 70)
        & (window[..., 1] < 40)
    )
    # viridis' low end, the background of the maps: ten maps big enough to read, not specks
    assert purple.sum() > 80_000, output
