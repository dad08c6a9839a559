"""Small output helpers every subcommand shares."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from segdiff_gui.core.floatfmt import json_text
from segdiff_gui.core.text import printable, terminal_safe

__all__ = ["TerminalConsole", "as_markup", "log_line", "plural", "print_json", "say"]


class TerminalConsole(Console):
    """Rich's console that writes what it is given as the text it is.

    Every string it renders (sentences, table cells and titles) is literal: rich's markup,
    emoji codes and highlighting are off unless a call asks for markup (``markup=True``, its
    names passed through :func:`rich.markup.escape`), so ``pip install 'segdiff[jax]'`` keeps
    its ``[jax]`` and a path's ``[old]`` stays. And every string passes :func:`terminal_safe`,
    so a name from a file, a model or a bundle cannot move the cursor, clear the screen or set
    the window's title. Its own styling still reaches the terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for literal in ("markup", "emoji", "highlight"):
            kwargs.setdefault(literal, False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(terminal_safe(text), **options)


def say(console: Console, line: str) -> None:
    """One line of prose that may hold names: plain text on one line (a newline in a name
    shows as U+FFFD, so it cannot forge the next line of output)."""
    console.print(printable(line), markup=False)


def log_line(console: Console, line: str) -> None:
    """A line of a log (where no bar is drawn), written as :func:`say` would show it but
    without rich's rendering, which costs a millisecond a line: a sweep at batch 1 writes one
    per image."""
    console.file.write(printable(line) + "\n")


def as_markup(text: str) -> str:
    """Text that may hold names, inside a line printed with markup (``[bold]…[/]``): on one
    line as :func:`say` prints it, its brackets escaped."""
    return escape(printable(text))


def print_json(value: object) -> None:
    print(json_text(value))


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
