"""Work that waits for a widget's first paint: what the launch shows comes first, and work a
user does not see yet (decoding the image list's pictures) starts once it is on screen.

A zero-time timer is not enough for that: it fires at the event loop's first turn, before the
window's first paint is processed, so a worker started from it took the interpreter from the
paint (the launch on the demo's cache painted ~60 ms later with the thumbnails' decoding
started that way)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

__all__ = ["AfterFirstPaint"]


class AfterFirstPaint(QObject):
    """Calls held until ``widget`` has painted once, each then made on the next turn of the
    event loop (after that paint has reached the screen); once it has painted, a call is made
    on the next turn. A widget that is never shown holds its calls: its work is for no one."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self._widget: QWidget | None = widget
        self._held: list[Callable[[], None]] = []
        widget.installEventFilter(self)

    @property
    def painted(self) -> bool:
        return self._widget is None

    def then(self, call: Callable[[], None]) -> None:
        if self.painted:
            QTimer.singleShot(0, call)
        else:
            self._held.append(call)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if self._widget is not None and event.type() == QEvent.Type.Paint:
            self._widget.removeEventFilter(self)
            self._widget = None
            held, self._held = self._held, []
            for call in held:
                QTimer.singleShot(0, call)
        return False
