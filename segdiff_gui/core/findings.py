"""One sentence of a diagnosis, with the figure it rests on and where the setting is
documented (core/diagnosis.py and core/deployment.py make them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Finding", "plural", "verb"]


@dataclass(frozen=True)
class Finding:
    """One sentence. ``topic`` is ``repeatability``, ``knobs``, ``cutoff``, ``advice`` or
    ``not measured``; ``figure`` the number it rests on; ``link`` the documentation."""

    topic: str
    sentence: str
    figure: str = ""
    link: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def verb(count: int, one: str, many: str) -> str:
    return one if count == 1 else many
