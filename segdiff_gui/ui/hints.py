"""The window's control for each setting an error names (see ``InputError.fix``): where the
CLI adds a flag, the window names its field in Model settings and offers to set it."""

from __future__ import annotations

from segdiff_gui.core.errors import with_remedy

__all__ = ["fix_action", "with_control"]

# setting → the field of Model settings (or the Matrix) that sets it
_CONTROLS = {
    "color": "colour",
    "resize": "resize",
    "scale": "scale",
    "mean": "mean",
    "std": "std",
    "output": "output",
    "activation": "activation",
    "trust_model": "trust this model",
    "trust_preprocess": "trust this function",
    "repeats": "repeats",
}


def _control(fix: str) -> tuple[str, str]:
    setting, _, value = fix.partition("=")
    return _CONTROLS.get(setting, ""), value


def with_control(message: str, fix: str) -> str:
    """The message and the control that mends it: ``… — in Model settings, colour: rgb``."""
    control, value = _control(fix)
    if not control:
        return message
    where = "the Matrix" if control == "repeats" else "Model settings"
    setting = f"tick “{control}”" if control.startswith("trust") else control
    shown = f": {value}" if value and value != "on" else ""
    return with_remedy(message, f"in {where}, {setting}{shown}")


def fix_action(fix: str) -> str:
    """The text of a button that applies the fix and runs again ("" when the user must
    choose, e.g. which output)."""
    control, value = _control(fix)
    if not control or not value:
        return ""
    if control.startswith("trust"):
        return "Trust this model and run again"
    return f"Set {control} to {value} and run again"
