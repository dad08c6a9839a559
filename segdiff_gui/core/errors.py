"""Errors a user can fix: shown as one line that names the file and what is wrong."""

from __future__ import annotations

import re
from collections.abc import Sequence

from segdiff_gui.core.text import printable

__all__ = ["ConfigError", "InputError", "first_line", "in_few_lines", "with_remedy"]

# The errors said one by one before the rest are counted (in_few_lines).
SHOWN_ERRORS = 5


class ConfigError(ValueError):
    """A configuration or preprocessing specification that cannot be understood."""


class InputError(ValueError):
    """Bad input (a model, image or cache file); ``str()`` is the one line shown to the user,
    whatever the names in it hold (:func:`~segdiff_gui.core.text.printable`): the API raises it
    as it is, into a notebook's traceback.

    ``fix`` names the setting that would mend it, as ``setting=value`` (``color=rgb``,
    ``trust_model=on``) or just ``setting`` (``output``: which one is the user's choice). The
    message names the setting in words; each front end adds its own control (the CLI its
    flag, the window its field), so no message tells a window's user to type a flag.
    """

    def __init__(self, path: object, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        said = f"{self.path}: {problem}" if self.path else problem
        super().__init__(printable(said))

    @classmethod
    def from_message(cls, message: str, fix: str = "") -> InputError:
        """Rebuild an error from its one line (as it crossed from a child process)."""
        return cls("", message, fix)


def in_few_lines(errors: Sequence[InputError]) -> list[str]:
    """The lines that say ``errors``: the first few as they are, then how many more, naming
    their file where they all share one. A bundle of thousands of damaged runs is said in a
    few lines, never a line each (the front end keeps every one where it lists them)."""
    lines = [str(error) for error in errors[:SHOWN_ERRORS]]
    rest = errors[SHOWN_ERRORS:]
    if rest:
        paths = {error.path for error in rest}
        where = f"{paths.pop()}: " if len(paths) == 1 and rest[0].path else ""
        lines.append(f"{where}and {len(rest):,} more unreadable entries")
    return lines


def with_remedy(message: str, remedy: str) -> str:
    """A failure's one line and the control a front end offers to mend it (``add --color
    rgb``, ``pass activation="sigmoid"``, ``in Model settings, colour: rgb``), as one sentence:
    the message often ends with the setting in words in parentheses, so the control follows a
    dash, never a second pair of parentheses."""
    return f"{message} — {remedy}" if remedy else message


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_KERAS_WRAPPER = "Exception encountered when calling "


def first_line(error: BaseException | str, limit: int = 300) -> str:
    """One telling line of an exception's message, or of a tool's text (TF and Keras
    messages run for pages).

    Usually the first; but TensorFlow opens traced errors with a header such as
    ``in user code:`` and puts the actual complaint last, and Keras 3 opens a layer's failure
    with ``Exception encountered when calling Lambda.call().`` and gives the reason (in
    terminal bold) on the next line: that reason is the line, with the layer beside it.
    """
    text = _ANSI.sub("", str(error))
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "" if isinstance(error, str) else type(error).__name__
    # Keras's wrapper may come first, or inside TensorFlow's traced "in user code:" report,
    # whose last line is then Keras's list of arguments ("• kwargs=…"), not the reason.
    for index, line in enumerate(lines[:-1]):
        if _KERAS_WRAPPER in line:  # "ValueError: Exception encountered when calling …"
            where = line.split(_KERAS_WRAPPER, 1)[1].rstrip(".")
            return f"{lines[index + 1]} (in {where})"[:limit]
    return (lines[-1] if lines[0].endswith(":") else lines[0])[:limit]
