import os
import tempfile

import pytest

# Widget tests run without a display, and keep their window layout out of the user's config.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="segdiff-gui-config-")


@pytest.fixture(autouse=True)
def collected_on_the_gui_thread(qapp):
    """As the app does (ui/gui_collector.py): a window test's garbage, and the tests' before
    it, collected on the GUI thread, never by a worker thread (a Qt object destroyed there
    hangs the process: a test of a sweep's planning once did)."""
    import gc

    from segdiff_gui.ui.gui_collector import GuiThreadCollector

    gc.collect()
    collector = GuiThreadCollector(qapp)
    yield
    collector.stop()
    collector.deleteLater()
    gc.collect()


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
