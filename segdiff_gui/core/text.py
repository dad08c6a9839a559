"""Text that came from a file (labels, names, host names) made safe to show: a terminal escape
in a crafted bundle must not reach the terminal, and a newline must not forge report lines."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "format_size",
    "has_control",
    "parse_size",
    "printable",
    "printable_lines",
    "shape_text",
    "terminal_safe",
]

# C0 controls (tab, newline and escape among them), DEL and the C1 controls; also the Unicode
# line and paragraph separators and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character replaced by U+FFFD (so that it stays visible)."""
    return _UNPRINTABLE.sub("\ufffd", text)


def printable_lines(lines: Iterable[str]) -> str:
    """Lines that may hold names, joined: each one line whatever its names hold."""
    return "\n".join(printable(line) for line in lines)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a character :func:`printable` would replace: where it cannot be
    shown as U+FFFD (a generated script, whose comment a line break would end), it is
    refused."""
    return _UNPRINTABLE.search(text) is not None


_UNPRINTABLE_IN_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def terminal_safe(text: str) -> str:
    """``text`` of several lines with every control character but the newline and the tab
    replaced by U+FFFD: no escape sequence (a window title, a screen clear) reaches a terminal."""
    return _UNPRINTABLE_IN_LINES.sub("\ufffd", text)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``512M``, ``2G``, ``1.5GiB``, ``4096``: a number of bytes (binary units), or ValueError."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (e.g. 512M, 2G)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def shape_text(dims: Iterable[int]) -> str:
    """An array's or an image's dimensions as people write them: ``256×256×3``."""
    return "×".join(map(str, dims))


def format_size(size: int) -> str:
    """Bytes as people read them: ``1.5 GiB``, ``320 MiB``, ``12 KiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:,.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"
    return f"{size} B"
