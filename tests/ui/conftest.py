import os
import tempfile

import pytest

# Widget tests run without a display, and keep their window layout out of the user's config.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="segdiff-gui-config-")


@pytest.fixture
def window_for(qtbot):
    """Build the real main window for command-line arguments, closing it afterwards."""
    from segdiff_gui.ui.app import build_window

    windows = []

    def build(*argv):
        window, _ = build_window([str(arg) for arg in argv])
        qtbot.addWidget(window)
        window.resize(1400, 900)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        return window

    yield build
    for window in windows:
        window.close()


@pytest.fixture
def window(qtbot, tmp_path):
    """A main window on an empty cache, shown (1600×900); a module may define its own."""
    from segdiff_gui.storage import ResultCache
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow

    built = MainWindow(InspectionModel(), ResultCache(tmp_path / "cache"))
    qtbot.addWidget(built)
    built.resize(1600, 900)
    built.show()
    qtbot.waitExposed(built)
    yield built
    built.close()
