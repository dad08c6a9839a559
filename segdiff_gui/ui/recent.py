"""Recently opened files: each entry a list of absolute paths (a bundle, or a model and its
images), stored as JSON so that a space in a name or a relative path survives; the menu shows
a short name."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMenu

from segdiff_gui.ui.plain_text import button_text, tooltip_text

__all__ = ["RecentFiles", "short_name"]

_KEY = "recent-paths"
_MOST = 8


def short_name(paths: Sequence[str]) -> str:
    """``model.keras + 16 images``; a bundle by its name."""
    first = Path(paths[0]).name
    rest = len(paths) - 1
    if not rest:
        return first
    return f"{first} + {Path(paths[1]).name}" if rest == 1 else f"{first} + {rest} images"


class RecentFiles:
    def __init__(self, menu: QMenu, open_paths: Callable[[list[str]], None]) -> None:
        self.menu = menu
        self.open_paths = open_paths
        self.fill()

    @staticmethod
    def entries() -> list[list[str]]:
        text = QSettings("segdiff", "segdiff-gui").value(_KEY)
        try:
            data = json.loads(text) if isinstance(text, str) else []
        except ValueError:
            return []
        return [
            entry
            for entry in data
            if isinstance(entry, list) and entry and all(isinstance(p, str) for p in entry)
        ]

    def remember(self, paths: Sequence[Path | str]) -> None:
        entry = [str(Path(p).absolute()) for p in paths]
        recent = [entry] + [e for e in self.entries() if e != entry]
        QSettings("segdiff", "segdiff-gui").setValue(_KEY, json.dumps(recent[:_MOST]))
        self.fill()

    def fill(self) -> None:
        self.menu.clear()
        entries = self.entries()
        self.menu.setEnabled(bool(entries))
        for entry in entries:
            action = self.menu.addAction(button_text(short_name(entry)))
            shown = entry if len(entry) <= 4 else [*entry[:3], f"… {len(entry) - 3} more"]
            action.setToolTip(tooltip_text("\n".join(shown)))
            action.setStatusTip(entry[0])
            action.triggered.connect(lambda _checked=False, e=entry: self.open_paths(list(e)))
        self.menu.setToolTipsVisible(True)
