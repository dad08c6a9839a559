"""The command line's control for each setting an error names (see ``InputError.fix``): the
lower rooms say what to change, in words; the CLI adds the flag that changes it."""

from __future__ import annotations

__all__ = ["with_flag"]

# setting → the flag of `segdiff run` (and `segdiff-gui`) that sets it; {} is the value.
_FLAGS = {
    "color": "--color {}",
    "resize": "--resize {}",
    "scale": "--scale {}",
    "mean": "--mean M[,M,M]",
    "std": "--std S[,S,S]",
    "output": "--output NAME|INDEX",
    "activation": "--activation {}",
    "trust_model": "--trust-model",
    "trust_preprocess": "--trust-preprocess",
    "repeats": "--repeats {}",
    "group": "--group ID",
    "model": "--model NAME",
}


def flag_for(fix: str) -> str:
    """``color=rgb`` → ``--color rgb``; ``""`` for no fix (or one the CLI has no flag for)."""
    setting, _, value = fix.partition("=")
    pattern = _FLAGS.get(setting)
    return pattern.format(value) if pattern else ""


def with_flag(message: str, fix: str) -> str:
    """The message and, where a setting mends it, the flag: ``… (add --color rgb)``."""
    flag = flag_for(fix)
    return f"{message} (add {flag})" if flag else message
