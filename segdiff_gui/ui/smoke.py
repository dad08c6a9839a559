"""``segdiff-gui --smoke-test``: prove an installation works end to end, without a person.

It opens the main window (offscreen unless a display is named), plans one configuration of the
bundled demo in a temporary cache, runs it through a real engine child (started the way this
installation starts children: ``python -m`` or, in a frozen bundle, the app itself), waits
until the map is shown, and exits 0; 1 with the reason otherwise.
"""

from __future__ import annotations

import sys
import tempfile
import time

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from segdiff_gui.core.config import RunConfig
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.main_window import MainWindow
from segdiff_gui.ui.session import MatrixSession
from segdiff_gui.version import __version__

__all__ = ["run_smoke_test"]


def run_smoke_test(app: QApplication, timeout_s: float = 300.0) -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="segdiff-smoke-") as folder:
        cache = ResultCache(folder)
        window = MainWindow(InspectionModel(), cache)
        request = MatrixRequest(
            demo_model(), tuple(demo_images()[:2]), cache, (RunConfig(),), repeats=1
        )
        session = MatrixSession(request)
        window.set_session(session)
        window.show()
        window.start_runs()
        loop = QEventLoop()
        poll = QTimer()

        def quit_when_done() -> None:
            if window.worker is None:  # every run ended
                loop.quit()

        poll.timeout.connect(quit_when_done)
        poll.start(100)
        QTimer.singleShot(int(timeout_s * 1000), loop.quit)
        loop.exec()
        poll.stop()
        seconds = time.perf_counter() - started
        runs = [run.label for run in window.model.runs]
        status = window.run_panel.status.text()
        window.close()
    if window.worker is None and runs == ["cpu b1 r0"]:
        print(f"segdiff-gui {__version__} smoke test passed: {runs[0]} computed by an engine "
              f"child ({sys.executable}) and shown in {seconds:.1f} s")  # fmt: skip
        return 0
    print(f"segdiff-gui smoke test FAILED after {seconds:.1f} s: runs shown {runs}; {status}",
          file=sys.stderr)  # fmt: skip
    return 1
