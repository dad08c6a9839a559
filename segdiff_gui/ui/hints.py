"""The window's control for each setting an error names (see ``InputError.fix``): where the
CLI adds a flag, the window names its field in Model settings (or the Matrix) and offers to set
it: the remedy's field, core/model_settings.py."""

from __future__ import annotations

from segdiff_gui.core.errors import with_remedy
from segdiff_gui.core.model_settings import REMEDIES, Remedy

__all__ = ["fix_action", "with_control"]


def _control(fix: str) -> tuple[Remedy, str]:
    setting, _, value = fix.partition("=")
    return REMEDIES.get(setting, Remedy()), value


def with_control(message: str, fix: str) -> str:
    """The message and the control that mends it: ``… — in Model settings, colour: rgb``."""
    remedy, value = _control(fix)
    if not remedy.control:
        return message
    setting = f"tick “{remedy.control}”" if remedy.tick else remedy.control
    shown = f": {value}" if value and value != "on" else ""
    return with_remedy(message, f"in {remedy.place}, {setting}{shown}")


def fix_action(fix: str) -> str:
    """The text of a button that applies the fix and runs again ("" when the user must
    choose, e.g. which output)."""
    remedy, value = _control(fix)
    if not remedy.control or not value:
        return ""
    if remedy.tick:
        return "Trust this model and run again"
    return f"Set {remedy.control} to {value} and run again"
