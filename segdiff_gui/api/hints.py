"""The API's argument for each setting an error names (``InputError.fix``): the lower rooms
say what to change in words, the CLI adds its flag, the window its field, and the API the
argument of ``segdiff_gui.run`` that changes it (its remedy's, core/model_settings.py)."""

from __future__ import annotations

from segdiff_gui.core.errors import InputError, with_remedy
from segdiff_gui.core.model_settings import REMEDIES, Remedy

__all__ = ["argument_for", "hinted", "with_argument"]


def argument_for(fix: str) -> str:
    """``color=rgb`` → ``preprocess={"color": "rgb"}``; ``""`` where the API has none."""
    setting, _, value = fix.partition("=")
    pattern = REMEDIES.get(setting, Remedy()).argument
    return pattern.format(value) if pattern else ""


def with_argument(error: InputError) -> InputError:
    """``error`` with the argument that mends it added: ``… — pass activation="sigmoid"``."""
    if not argument_for(error.fix):
        return error
    return InputError(error.path, hinted(error.problem, error.fix), error.fix)


def hinted(message: str, fix: str) -> str:
    """A failure's one line with the argument that mends it, where one does."""
    argument = argument_for(fix)
    return with_remedy(message, f"pass {argument}" if argument else "")
