"""Layout policy of the main window: its first size, how the first width is shared between
the runs, the maps and the inspector, and the layout remembered between sessions."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow

from segdiff_gui.ui.inspector import PixelInspector

__all__ = ["GRID_MINIMUM_WIDTH", "WindowLayout", "maps_keep"]

# pixels: room for a few runs side by side whatever the docks' contents ask for, in a window
# that still fits a 1024-pixel-wide screen
GRID_MINIMUM_WIDTH = 320


def maps_keep(width: int) -> int:
    """What the maps keep of a window ``width`` pixels wide when the docks ask for room:
    three tenths of it (never less than :data:`GRID_MINIMUM_WIDTH`), so that a window on a
    1920-pixel screen holds the runs, an inspector beside an exact run and the maps side by
    side."""
    return max(GRID_MINIMUM_WIDTH, width * 3 // 10)


class WindowLayout:
    """``runs`` and ``right`` are the window's docks; ``inspector`` is in ``right``: its
    columns (value, Δ, ULPs, class, and beside an exact run its ULPs from exact) decide how
    wide that dock wants to be."""

    def __init__(
        self, window: QMainWindow, runs: QDockWidget, right: QDockWidget, inspector: PixelInspector
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
        if self.share_when_shown and not self._side_by_side(self.window.width(), False):
            # Stacked before the window is shown: side by side, the docks' least widths would
            # widen the window past its first size (and past a small screen's edge).
            self.window.tabifyDockWidget(self.right, self.runs)

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

    def inspector_width(self, beside_exact: bool) -> int:
        """What the right dock needs to show every column of the inspector."""
        return self.inspector.wanted_width(beside_exact) + self._dock_frame()

    def _dock_frame(self) -> int:
        """The right dock's width beside the inspector's: its margins and the tabs'."""
        return max(self.right.width() - self.inspector.width(), 0)

    def _side_by_side(self, width: int, beside_exact: bool) -> bool:
        """Whether a window ``width`` pixels wide holds the runs, the inspector's columns and
        the maps' share side by side."""
        runs = self.runs.minimumSizeHint().width()
        return width - runs - self.inspector_width(beside_exact) >= maps_keep(width)

    def _stacked(self) -> bool:
        return bool(self.window.tabifiedDockWidgets(self.right))

    def share_width(self, has_runs: bool, beside_exact: bool = False) -> None:
        """Share the window's width the first time it is shown: a fifth to the runs, to the
        inspector the width of its columns (``beside_exact``: with an exact run's, which a run
        planned or shown makes wanted), the rest to the maps, which keep their share
        (:func:`maps_keep`). Docks cannot shrink below their contents; the maps' minimum width
        then decides.

        A window too narrow for the runs, the inspector and the maps' share side by side (a
        laptop's screen) would squeeze the maps between two docks: the runs then share the
        inspector's place, as a tab behind it."""
        window, runs, right = self.window, self.runs, self.right
        width = window.width()
        wanted = self.inspector_width(beside_exact)
        if not self._side_by_side(width, beside_exact):
            window.tabifyDockWidget(right, runs)
            (right if has_runs else runs).raise_()  # no run yet: show them coming
            room = width - maps_keep(width)
            window.resizeDocks([right], [min(wanted, room)], Qt.Orientation.Horizontal)
            return
        if self._stacked():  # stacked before, on a narrower window
            window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, runs)
        runs_width = max(width // 5, runs.minimumSizeHint().width())
        room = width - runs_width - maps_keep(width)
        window.resizeDocks(
            [runs, right], [runs_width, min(wanted, room)], Qt.Orientation.Horizontal
        )

    def widen(self, needed: int) -> None:
        """The inspector's rows became wider than its dock (long labels, an exact run's
        float64 value): give it the room, as far as the maps keep their share, so that Δ,
        ULPs and class stay in view."""
        window, right = self.window, self.right
        width = window.width()
        beside = 0 if self._stacked() else self.runs.width()
        room = width - beside - maps_keep(width)
        wanted = min(needed + self._dock_frame(), room)
        if wanted > right.width():
            window.resizeDocks([right], [wanted], Qt.Orientation.Horizontal)
