"""Text that came from a file (labels, names, host names) made safe to show: a terminal escape
in a crafted bundle must not reach the terminal, and a newline must not forge report lines."""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls (tab, newline and escape among them), DEL and the C1 controls; also the Unicode
# line and paragraph separators and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character replaced by U+FFFD (so that it stays visible)."""
    return _UNPRINTABLE.sub("\ufffd", text)
