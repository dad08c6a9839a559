"""Text from a file, a model or a bundle (a run's label, an image's or a layer's name, a host
name, an error that quotes a path) shown by Qt as the text it is, never as markup:
a name of nested ``<table>`` tags laid out as HTML froze the window for minutes.

Qt reads as HTML a label whose text looks like it (``QLabel``'s default ``AutoText``), every
tooltip that does, a message box's texts, and every pyqtgraph label (``LabelItem`` and axis
labels are HTML always). So: a label that shows names is plain text (:func:`plain_label`); a
label that is HTML on purpose says so (:func:`rich_label`) and escapes each name
(:func:`as_html`); a tooltip goes through :func:`tooltip_text`; a message box is made by
:func:`plain_message_box`."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt  # mightBeRichText is QtGui's (not QtCore.Qt's, unpatched)
from PySide6.QtWidgets import QLabel, QMessageBox, QSizePolicy, QWidget

from segdiff_gui.core.text import printable, terminal_safe

__all__ = [
    "as_html",
    "button_text",
    "plain_label",
    "plain_message_box",
    "rich_label",
    "tooltip_text",
]


def plain_label(label: QLabel) -> QLabel:
    """``label``, showing its text as plain text whatever it holds, never wider than its
    place (:func:`_as_wide_as_its_place`)."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return _as_wide_as_its_place(label)


def rich_label(label: QLabel) -> QLabel:
    """``label``, showing its text as HTML always (the names in it escaped with
    :func:`as_html`): an escaped name alone (``a &amp; b``) would otherwise look like plain
    text to Qt, and be shown with its entities. Never wider than its place."""
    label.setTextFormat(Qt.TextFormat.RichText)
    return _as_wide_as_its_place(label)


def _as_wide_as_its_place(label: QLabel) -> QLabel:
    """A label that shows names takes the width its layout gives it, never the width of its
    text: a name is one word to Qt's line breaking, so a name of 10,000 characters made the
    Runs panel, and with it the window, 66,000 pixels wide. What does not fit is cut at the
    label's edge (the whole text stays the label's, for copying and the tests)."""
    policy = label.sizePolicy()
    policy.setHorizontalPolicy(QSizePolicy.Policy.Ignored)
    label.setSizePolicy(policy)
    return label


def as_html(text: str) -> str:
    """``text`` as HTML that shows it as it is: markup escaped, newlines kept."""
    return escape(text, quote=False).replace("\n", "<br>")


def button_text(text: str) -> str:
    """``text`` as the text of a menu entry or a button, shown as it is: Qt reads ``&`` there
    as the mark of a shortcut letter (``R&D.keras`` would show ``RD.keras``, ``D``
    underlined); one line, a control character shown as U+FFFD."""
    return printable(text).replace("&", "&&")


def tooltip_text(text: str) -> str:
    """``text`` as a tooltip that shows it as it is, its control characters but the newline
    and the tab made visible (U+FFFD: a right-to-left override would reorder what follows).
    Qt takes a tooltip that looks like HTML (by :func:`Qt.mightBeRichText`, the test it applies
    itself) for HTML: such a text is escaped, its spaces and newlines kept; any other is left
    as it is, and shown as before."""
    text = terminal_safe(text)
    if not GuiQt.mightBeRichText(text):
        return text
    return f"<p style='white-space:pre-wrap'>{escape(text, quote=False)}</p>"


def plain_message_box(
    parent: QWidget | None,
    title: str,
    text: str,
    informative: str = "",
    icon: QMessageBox.Icon = QMessageBox.Icon.NoIcon,
) -> QMessageBox:
    """A message box (not yet shown) whose text and informative text are plain text.
    (``QMessageBox.setTextFormat`` covers the text only: the informative text is a label of
    its own.)"""
    box = QMessageBox(icon, title, text, QMessageBox.StandardButton.NoButton, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    if informative:
        box.setInformativeText(informative)
    for label in box.findChildren(QLabel):
        label.setTextFormat(Qt.TextFormat.PlainText)
    return box
