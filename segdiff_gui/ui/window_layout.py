"""Layout policy of the main window: its first size, how the first width is shared between
the runs, the maps and the inspector, and the layout remembered between sessions."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QWidget

__all__ = ["GRID_MINIMUM_WIDTH", "SIDE_BY_SIDE_WIDTH", "WindowLayout"]

# pixels: room for a few runs side by side whatever the docks' contents ask for, in a window
# that still fits a 1024-pixel-wide screen
GRID_MINIMUM_WIDTH = 320
# pixels: a first window narrower than this puts the runs in a tab behind the inspector
SIDE_BY_SIDE_WIDTH = 1400


class WindowLayout:
    """``runs`` and ``right`` are the window's docks; ``inspector`` is in ``right``: its
    columns (value, Δ, ULPs, class) decide how wide that dock wants to be."""

    def __init__(
        self, window: QMainWindow, runs: QDockWidget, right: QDockWidget, inspector: QWidget
    ) -> None:
        self.window = window
        self.runs = runs
        self.right = right
        self.inspector = inspector
        self.share_when_shown = False

    def restore(self) -> None:
        """The layout of the last session, else a first geometry; a first layout shares the
        width once the window is shown."""
        settings = QSettings("segdiff", "segdiff-gui")
        geometry, state = settings.value("geometry"), settings.value("state")
        if not (isinstance(geometry, QByteArray) and self.window.restoreGeometry(geometry)):
            self.first_geometry()
        self.share_when_shown = not (
            isinstance(state, QByteArray) and self.window.restoreState(state)
        )

    def save(self) -> None:
        settings = QSettings("segdiff", "segdiff-gui")
        settings.setValue("geometry", self.window.saveGeometry())
        settings.setValue("state", self.window.saveState())

    def first_geometry(self) -> None:
        """Most of the screen, centred: the maps need the room (1400 × 860 with no screen)."""
        screen = QGuiApplication.primaryScreen()
        if screen is None:
            self.window.resize(1400, 860)
            return
        available = screen.availableGeometry()
        self.window.resize(available.size() * 0.92)
        self.window.move(available.center() - self.window.rect().center())

    def inspector_width(self) -> int:
        """What the right dock needs to show every column of the inspector."""
        frame = self.right.width() - self.inspector.width()  # the dock's and the tabs' margins
        return int(self.inspector.sizeHint().width()) + max(frame, 0)

    def share_width(self, has_runs: bool) -> None:
        """Share the window's width the first time it is shown: a fifth to the runs, to the
        inspector the width of its columns (at most two fifths), the rest to the maps. Docks
        cannot shrink below their contents; the maps' minimum width then decides.

        A window narrower than :data:`SIDE_BY_SIDE_WIDTH` (a laptop screen) would leave the
        maps a third of it: the runs then share the inspector's place, as a tab behind it."""
        window, runs, right = self.window, self.runs, self.right
        width = window.width()
        wanted = self.inspector_width()
        if width < SIDE_BY_SIDE_WIDTH:
            window.tabifyDockWidget(right, runs)
            (right if has_runs else runs).raise_()  # no run yet: show them coming
            window.resizeDocks([right], [min(wanted, width // 2)], Qt.Orientation.Horizontal)
        else:
            if window.tabifiedDockWidgets(right):  # stacked before, on a narrower window
                window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, runs)
            window.resizeDocks(
                [runs, right], [width // 5, min(wanted, width * 2 // 5)], Qt.Orientation.Horizontal
            )
