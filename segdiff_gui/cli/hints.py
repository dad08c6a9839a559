"""The command line's control for each setting an error names (see ``InputError.fix``): the
lower rooms say what to change, in words; the CLI adds the flag that changes it (its remedy's,
core/model_settings.py)."""

from __future__ import annotations

from segdiff_gui.cli.parser import command_options
from segdiff_gui.core.errors import with_remedy
from segdiff_gui.core.model_settings import REMEDIES, Remedy

__all__ = ["with_flag"]

# A command whose settings are another's options: slurm-script passes MODEL, IMAGES and the
# options after them to `segdiff run`, so a fix is one of run's flags there.
_SETTINGS_OF = {"slurm-script": "run"}


def flag_for(fix: str, command: str) -> str:
    """``color=rgb`` → ``--color rgb``; ``""`` for no fix, or one whose flag ``command`` (a
    ``segdiff`` subcommand) does not have: a hint never names an option the command rejects."""
    setting, _, value = fix.partition("=")
    pattern = REMEDIES.get(setting, Remedy()).flag
    if not pattern or pattern.split()[0] not in command_options(_SETTINGS_OF.get(command, command)):
        return ""
    return pattern.format(value)


def with_flag(message: str, fix: str, command: str) -> str:
    """The message and, where a flag of ``command`` mends it, that flag, as one sentence:
    ``… (colour conversion) — add --color rgb``."""
    flag = flag_for(fix, command)
    return with_remedy(message, f"add {flag}" if flag else "")
