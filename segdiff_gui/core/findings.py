"""One sentence of a diagnosis, with the figure it rests on and where the setting is
documented (core/diagnosis.py and core/deployment.py make them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Finding", "plural", "verb"]


@dataclass(frozen=True)
class Finding:
    """One sentence. ``topic`` is ``repeatability``, ``knobs``, ``cutoff``, ``exact``,
    ``advice`` or ``not measured``; ``figure`` the number it rests on; ``link`` the documentation;
    ``measure`` the configurations (``key=value`` specs) whose runs would answer what it says
    was not measured (core/remedies.py)."""

    topic: str
    sentence: str
    figure: str = ""
    link: str = ""
    measure: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["measure"] = list(self.measure)
        return data


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def verb(count: int, one: str, many: str) -> str:
    return one if count == 1 else many
