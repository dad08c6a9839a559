"""Render the documentation's pictures from the running window on the bundled demo.

The docs never show a picture the current code would not draw: every PNG under
``docs/images`` is this script's, taken from ``segdiff-gui``'s own window (the one that
``segdiff-gui`` with no arguments opens) on the real xcb platform, after its runs computed::

    xvfb-run -a -s "-screen 0 1366x768x24" .venv/bin/python tools/render_screenshots.py

It computes the demo's runs and the exact (float64) run into ``--cache`` (a new temporary
cache by default; an existing one serves what it holds), opens the window as ``segdiff-gui``
does, waits until every run is shown, and grabs the window in a few states, each written as
a small palette PNG. Exit 0 with the files it wrote; 1 with the reason.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE = (1366, 768)  # a common laptop screen: what a user's first window is laid out for
# Every picture the docs show, and none other (tests/test_docs.py holds docs/images to it).
PICTURES = ("window-flips", "window-ulp", "window-diagnosis", "window-exact")


def _exact_run(cache: Path) -> None:
    """The demo's exact (float64) run of its first image, as README's third question runs it,
    so that the window shows the error against the exact map."""
    from segdiff_gui.resources import demo_dir

    demo = demo_dir()
    images = sorted(str(path) for path in (demo / "images").glob("*.png"))
    command = [sys.executable, "-m", "segdiff_gui.cli", "run", str(demo / "unet_sigmoid.keras"),
               *images, "--config", "precision=float64,batch=1", "--repeats", "1",
               "--cache", str(cache)]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def _wait(app: object, done: Callable[[], bool], timeout_s: float) -> bool:
    from PySide6.QtWidgets import QApplication

    assert isinstance(app, QApplication)
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.05)
    for _ in range(20):  # let the last paints land
        app.processEvents()
        time.sleep(0.02)
    return done()


def _save(widget: object, path: Path, width: int) -> None:
    """``widget`` as it is drawn now, scaled to ``width`` pixels and reduced to 256 colours."""
    from PIL import Image
    from PySide6.QtWidgets import QWidget

    assert isinstance(widget, QWidget)
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "grab.png"
        if not widget.grab().save(str(raw)):
            raise RuntimeError(f"could not grab {path.name}")
        with Image.open(raw) as grabbed:
            picture = grabbed.convert("RGB")
    if picture.width > width:
        height = round(picture.height * width / picture.width)
        picture = picture.resize((width, height), Image.Resampling.LANCZOS)
    picture.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def render(out: Path, cache: Path, width: int) -> list[Path]:
    os.environ["QT_QPA_PLATFORM"] = "xcb"  # the real platform, never offscreen
    from PySide6.QtWidgets import QApplication

    from segdiff_gui.ui.app import build_window, configure_application
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.view_modes import VIEW_MODES

    _exact_run(cache)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    assert isinstance(app, QApplication)
    if app.platformName() != "xcb":
        raise RuntimeError(f"Qt runs on {app.platformName()!r}, not xcb")
    configure_application(app)
    modes = {mode.name: mode for mode in VIEW_MODES}
    written: list[Path] = []

    def opened(*configs: str) -> MainWindow:
        """The window ``segdiff-gui`` opens on the demo (its own matrix, or ``configs``), once
        every run is shown."""
        arguments = ["--cache", str(cache), *(f"--config={spec}" for spec in configs)]
        window, _ = build_window(arguments)
        window.resize(*SIZE)
        window.show()
        window.start_runs()
        if not _wait(app, lambda: window.worker is None and bool(window.model.runs), 900):
            raise RuntimeError("the demo's runs did not finish within 15 minutes")
        return window

    def shot(window: MainWindow, name: str) -> None:
        assert name in PICTURES
        _wait(app, lambda: False, 1.0)
        path = out / f"{name}.png"
        _save(window, path, width)
        written.append(path)

    window = opened()  # segdiff-gui with no arguments
    window.model.mode = modes["flips"]
    window.step_flip(1)  # a flipped pixel, centred and zoomed in, read in the inspector
    window.tabs.setCurrentWidget(window.inspector)
    shot(window, "window-flips")
    window.model.mode = modes["ulp"]
    window.tabs.setCurrentWidget(window.stats)
    shot(window, "window-ulp")
    window.model.mode = modes["flips"]
    window.tabs.setCurrentWidget(window.analysis.diagnosis)
    shot(window, "window-diagnosis")
    window.close()
    window.shut_down()
    # The exact run beside a few float32 ones: each run minus the exact map, and who is right.
    window = opened("batch=1", "batch=64", "precision=bf16", "precision=float64")
    window.model.mode = modes["error against exact"]
    window.step_flip(1)
    window.tabs.setCurrentWidget(window.inspector)
    shot(window, "window-exact")
    window.close()
    window.shut_down()
    assert tuple(path.stem for path in written) == PICTURES
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--cache", type=Path, help="result cache (default: a new temporary one)")
    parser.add_argument("--width", type=int, default=1100, help="pictures' width in pixels")
    args = parser.parse_args()
    if not os.environ.get("DISPLAY"):
        print("render_screenshots: no X display; run it under xvfb-run", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="segdiff-shots-") as folder:
        try:
            written = render(args.out, args.cache or Path(folder) / "cache", args.width)
        except (RuntimeError, subprocess.CalledProcessError) as error:
            print(f"render_screenshots: {error}", file=sys.stderr)
            return 1
    for path in written:
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
              f"{path.stat().st_size // 1024} KB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
