"""The View menu and its shortcuts switch the view, and the documentation names the views as the
window does."""

from __future__ import annotations

from pathlib import Path

from tests.factories import menu_action


def test_view_menu_items_and_their_shortcuts_switch_the_view(window):
    """Each item switches the view and the toolbar's box with it (one logged TypeError:
    QComboBox.setCurrentText(bool) and switched nothing)."""
    for text, mode, key in (
        ("&Difference", "difference", "Ctrl+2"),
        ("&Ulp", "ulp", "Ctrl+3"),
        ("&Flips", "flips", "Ctrl+4"),
        ("&Probability", "probability", "Ctrl+1"),
    ):
        action = menu_action(window, text)
        assert action.shortcut().toString() == key
        action.trigger()
        assert window.model.mode.name == mode
        assert window.toolbar.mode_box.currentText() == mode


def test_the_docs_name_the_views_as_the_window_does():
    """The window's page of the documentation lists the views by the names the window gives
    them (README once named a "classes" view the window calls "flips")."""
    import re

    from segdiff_gui.ui.view_modes import VIEW_MODES

    page = (Path(__file__).parents[2] / "docs" / "window.md").read_text()
    (listed,) = re.findall(r"switch the view \(([^;)]*)", page)
    assert [name.strip() for name in listed.split(",")] == [mode.name for mode in VIEW_MODES]
