"""Small output helpers every subcommand shares."""

from __future__ import annotations

import json

__all__ = ["plural", "print_json"]


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2, default=str))


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
