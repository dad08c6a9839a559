"""``segdiff-gui``: with no arguments it opens the bundled demo; ``segdiff-gui MODEL IMAGE...``
opens a model on images; ``segdiff-gui --open BUNDLE.h5`` inspects results made elsewhere.

TensorFlow is never imported here: inference runs in engine children."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.text import printable
from segdiff_gui.runner.arguments import (
    add_configs,
    add_model_settings,
    add_repeats_and_timeout,
    add_source,
)
from segdiff_gui.version import __version__

if TYPE_CHECKING:  # imported where they are used: Qt and the window after the runs start
    from PySide6.QtWidgets import QApplication

    from segdiff_gui.runner.early import RunsStartedEarly
    from segdiff_gui.storage.cache import ResultCache
    from segdiff_gui.ui.main_window import MainWindow
    from segdiff_gui.ui.session import BundleSession, MatrixSession

    Opened = tuple[ResultCache, MatrixSession | BundleSession]

__all__ = ["build_window", "configure_application", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="segdiff-gui",
        description="Inspect how a segmentation model's probability maps change between runs.",
    )
    parser.add_argument("model", nargs="?", help=".keras, .h5 or SavedModel folder")
    parser.add_argument("images", nargs="*", help="images or folders (the first is the target)")
    add_configs(parser)
    add_source(parser)
    add_repeats_and_timeout(parser)
    add_model_settings(parser)
    parser.add_argument("--open", metavar="BUNDLE", help="a bundle made by 'segdiff bundle'")
    parser.add_argument("--cache", metavar="PATH", help="result cache folder")
    parser.add_argument(
        "--no-run", action="store_true", help="show cached results only; start nothing"
    )
    parser.add_argument(
        "--smoke-test",
        action="store_true",
        help="open the window (offscreen unless QT_QPA_PLATFORM names a platform), run one "
        "demo inference in an engine child, exit 0",
    )
    # For the start-up benchmark (tests/benchmarks): print "painted" once results are shown.
    parser.add_argument("--quit-when-painted", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"segdiff-gui {__version__}")
    return parser


def open_session(args: argparse.Namespace) -> Opened:
    """The cache and the session that ``args`` open, without Qt (bad input raises)."""
    from segdiff_gui.io.images import collect_images
    from segdiff_gui.resources import demo_dir, demo_images, demo_model
    from segdiff_gui.runner.arguments import configs_of, model_settings
    from segdiff_gui.runner.matrices import demo_configs
    from segdiff_gui.runner.plan import check_model_path, check_source
    from segdiff_gui.runner.request import MatrixRequest
    from segdiff_gui.storage.bundle import BundleReader
    from segdiff_gui.storage.cache import ResultCache
    from segdiff_gui.ui.session import BundleSession, MatrixSession

    # The request the flags make, as `segdiff run` makes it: the same runs, the same cache keys.
    configs = configs_of(args.config, args.model)  # an artefact's: from its own runtime
    source_configs = configs_of(args.source_config, None)
    settings = model_settings(args)
    cache = ResultCache(args.cache) if args.cache else ResultCache()
    if args.open:
        return cache, BundleSession(BundleReader(args.open))
    cache.claim()  # before anything is written into it; a folder of other files is refused
    if args.model:
        if not args.images:
            raise InputError(args.model, "give the images to run it on after the model")
        model, images = check_model_path(args.model), tuple(collect_images(args.images))
        source = Path(check_source(model, Path(args.source)).path) if args.source else None
        request = MatrixRequest(
            model, images, cache, configs, repeats=args.repeats, target=args.target,
            settings=settings, timeout_s=args.timeout, source=source,
            source_configs=source_configs,
        )  # fmt: skip
        return cache, MatrixSession(request)
    request = MatrixRequest(
        demo_model(), tuple(demo_images()), cache, configs, demo_configs,
        repeats=args.repeats, settings=settings, timeout_s=args.timeout,
    )  # fmt: skip
    # The demo's ground truth: Dice in the sweep at once.
    return cache, MatrixSession(request, truth=demo_dir() / "masks")


def build_window(
    argv: Sequence[str], opened: Opened | None = None
) -> tuple[MainWindow, argparse.Namespace]:
    """Make the model, session and window for ``argv`` (QApplication must exist); ``opened``:
    what :func:`open_session` gave for them already."""
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow

    args = _parser().parse_args(list(argv))
    cache, session = opened or open_session(args)
    window = MainWindow(InspectionModel(), cache)
    window.set_session(session)
    return window, args


def _start_runs_early(
    args: argparse.Namespace, session: MatrixSession | BundleSession
) -> RunsStartedEarly | None:
    """The runs the window will start, started now (before Qt): their first children import
    TensorFlow while the window builds. None where the window starts none."""
    from segdiff_gui.runner.early import RunsStartedEarly
    from segdiff_gui.ui.session_model import matrix_of

    matrix = matrix_of(session)
    if args.no_run or matrix is None:
        return None
    return RunsStartedEarly(matrix.runner)


def configure_application(app: QApplication) -> None:
    """Name, version and icon: what the desktop shows for every window of the app."""
    from PySide6.QtGui import QIcon

    from segdiff_gui.resources import APP_ID, icon_path

    app.setApplicationName("segdiff")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName(APP_ID)  # Wayland finds the entry (and its icon) by this name
    app.setWindowIcon(QIcon(str(icon_path())))


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # --help, --version and mistyped options answer before Qt starts (no display needed).
    args = _parser().parse_args(arguments)
    if args.smoke_test:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # read when Qt starts
    # The session, and the runs it starts, before Qt: the engine children import TensorFlow
    # while Qt and the window's modules import (a fresh demo's first map comes that much
    # sooner); bad input is said once Qt is up, as before.
    opened, runs, problem = None, None, None
    if not args.smoke_test:
        try:
            opened = open_session(args)
        except (InputError, ConfigError) as error:
            problem = error
        else:
            runs = _start_runs_early(args, opened[1])
    from PySide6.QtWidgets import QApplication, QMessageBox

    from segdiff_gui.ui.gui_collector import GuiThreadCollector

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)  # a window's application, never a bare core one
    configure_application(app)
    GuiThreadCollector(app)  # a Qt object collected on a worker thread hangs the window
    if args.smoke_test:
        from segdiff_gui.ui.smoke import run_smoke_test

        return run_smoke_test(app)
    try:
        if problem is not None:
            raise problem
        window, args = build_window(arguments, opened)
    except (InputError, ConfigError) as error:
        if runs is not None:
            runs.cancel()
        print(f"segdiff-gui: {printable(str(error))}", file=sys.stderr)
        if app.platformName() != "offscreen":  # no screen, no one to close a dialog
            from segdiff_gui.ui.plain_text import plain_message_box  # the error quotes paths

            plain_message_box(None, "segdiff", str(error), icon=QMessageBox.Icon.Critical).exec()
        return 2
    if args.quit_when_painted:
        from segdiff_gui.ui.paint_probe import quit_when_painted

        quit_when_painted(app, window)
    app.aboutToQuit.connect(window.shut_down)  # a quit without a close waits for threads too
    window.show()
    if runs is not None and window.run_panel.run_button.isEnabled():
        window.start_runs(lambda: runs)  # missing runs fill in as they finish
    elif runs is not None:
        runs.cancel()  # the window found a problem with the input: it says which
    status = int(app.exec())
    return status or (2 if window.unreadable_reported else 0)


if __name__ == "__main__":
    sys.exit(main())
