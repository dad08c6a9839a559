"""Why runs failed (or the input was refused), said where the user is looking: in the status
bar, and over the views while they are empty, each with the button that applies the fix. It
repeats the Runs panel's problem (``RunPanel.problem_changed``); its buttons ask for the fix as
the panel's own button does (``RunPanel.fix_requested``: one path to mend it)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)
from superqt import QElidingLabel

from segdiff_gui.ui.hints import fix_action
from segdiff_gui.ui.inspection import InspectionModel
from segdiff_gui.ui.plain_text import button_text, plain_label, tooltip_text

__all__ = ["ProblemNotice"]

_RED = "color: #b00020"
_FIX_TIP = "Change that setting in Model settings and run again"
_OVER_VIEWS_WIDTH = 0.8  # of the views' width: the notice over empty views


class ProblemNotice(QObject):
    """The problem on show, in ``status_bar`` and over ``views`` while no run is shown."""

    fix_requested = Signal(str)  # the fix (InputError.fix) of the problem on show

    def __init__(self, model: InspectionModel, status_bar: QStatusBar, views: QWidget) -> None:
        super().__init__(views)
        self.model = model
        self.status_bar = status_bar
        self.views = views
        self._text = ""
        self._fix = ""
        # In the status bar: one line, cut at its end (the whole text its tooltip).
        self.status_text = QElidingLabel()
        plain_label(self.status_text).setStyleSheet(_RED)
        self.status_fix = self._fix_button()
        self.in_status_bar = QWidget()
        line = QHBoxLayout(self.in_status_bar)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self.status_text, 1)
        line.addWidget(self.status_fix)
        status_bar.addWidget(self.in_status_bar, 1)
        # Over the empty views: the whole text, wrapped, on a panel of its own.
        self.over_views = QFrame(views)
        self.over_views.setFrameShape(QFrame.Shape.StyledPanel)
        self.over_views.setAutoFillBackground(True)
        heading = QLabel("No map to show")
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)
        self.view_text = plain_label(QLabel())
        self.view_text.setWordWrap(True)
        self.view_text.setStyleSheet(_RED)
        self.view_fix = self._fix_button()
        panel = QVBoxLayout(self.over_views)
        panel.addWidget(heading)
        panel.addWidget(self.view_text)
        panel.addWidget(self.view_fix, 0, Qt.AlignmentFlag.AlignHCenter)
        views.installEventFilter(self)  # kept in the middle of the views as they resize
        model.events.loaded.connect(self._place)
        self.show("")

    def _fix_button(self) -> QPushButton:
        button = QPushButton()
        button.setToolTip(_FIX_TIP)
        button.clicked.connect(lambda: self.fix_requested.emit(self._fix))
        return button

    @property
    def text(self) -> str:
        return self._text

    def show(self, text: str, fix: str = "") -> None:
        """Say ``text`` ("" says nothing), with the button for ``fix`` where a setting mends
        it. Said again, it is brought back over what the status bar said meanwhile."""
        self._text, self._fix = text, fix
        action = fix_action(fix) if text else ""
        for label in (self.status_text, self.view_text):
            label.setText(text)
        self.status_text.setToolTip(tooltip_text(text))
        for button in (self.status_fix, self.view_fix):
            button.setText(button_text(action))
            button.setVisible(bool(action))
        self.in_status_bar.setVisible(bool(text))
        if text:
            self.status_bar.clearMessage()  # a message would hide it (progress, "done")
        self._place()

    def _place(self) -> None:
        """Over the views while they are empty and there is something to say, centred."""
        panel = self.over_views
        shown = bool(self._text) and not self.model.runs
        panel.setVisible(shown)
        if not shown:
            return
        width = int(self.views.width() * _OVER_VIEWS_WIDTH)
        panel.setFixedWidth(width)
        layout = panel.layout()
        assert layout is not None  # made with it
        panel.setFixedHeight(layout.totalHeightForWidth(width))  # the text wrapped, whole
        panel.move((self.views.width() - width) // 2, (self.views.height() - panel.height()) // 2)
        panel.raise_()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if watched is self.views and event.type() == QEvent.Type.Resize:
            self._place()
        return False
