"""Single-key shortcuts that work whichever control has the keyboard, but a field where
letters are typed: N and P walk through the flips right after a cutoff is typed.

Qt gives a key to the focused widget before any shortcut when that widget asks for it (a
``ShortcutOverride``), and every spin box asks for every printable key, letters included,
although it takes only digits: after a cutoff was typed, N did nothing until the image was
clicked. Here the window's number boxes let the given shortcuts through, first applying what
was typed (as leaving the box would: N after typing a cutoff walks the flips at that cutoff).
Fields where letters are typed keep them: the matrix editor's ``key=value`` lines and batch
sizes, Model settings' mean, std and output name, a combo box being edited."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QAbstractSpinBox, QWidget

__all__ = ["KeysOverNumberBoxes"]


class KeysOverNumberBoxes(QObject):
    """Lets ``actions``' shortcuts through every number box under the widgets it watches."""

    def __init__(self, actions: Sequence[QAction], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._shortcuts = [action.shortcut() for action in actions]

    def watch(self, root: QWidget) -> None:
        """Watch every number box (spin box) under ``root``, as built now."""
        for box in root.findChildren(QAbstractSpinBox):
            box.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(watched, QAbstractSpinBox)
            and isinstance(event, QKeyEvent)
            and QKeySequence(event.keyCombination()) in self._shortcuts
        ):
            watched.interpretText()  # what was typed applies first, as on leaving the box
            return True  # not taken by the box (the event stays unaccepted): the shortcut runs
        return False
