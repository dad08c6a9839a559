"""Where segdiff keeps things by default: the result cache and the runtimes' compilation
caches, both in the user's cache folder (platformdirs)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from platformdirs import user_cache_dir

__all__ = ["compilation_cache_dir", "compilation_entry", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$SEGDIFF_CACHE`` if set, else the platform's user cache folder (``~/.cache/segdiff``)."""
    override = os.environ.get("SEGDIFF_CACHE")
    return Path(override) if override else Path(user_cache_dir("segdiff", appauthor=False))


def compilation_cache_dir(runtime: str) -> Path:
    """Where a runtime keeps its persistent compilation cache: one per user, shared by every
    result cache (``$SEGDIFF_COMPILATION_CACHE`` overrides it). Not inside a result cache:
    JAX's entries are keyed with the folder's own path (measured with jax 0.10.2: a copy in
    another folder was missed entry by entry), so each new cache would compile again."""
    override = os.environ.get("SEGDIFF_COMPILATION_CACHE")
    base = Path(override) if override else Path(user_cache_dir("segdiff", appauthor=False))
    return base / "compiled" / runtime


def compilation_entry(root: Path) -> frozenset[str]:
    """``{"compiled"}`` where ``root`` is the folder that holds the runtimes' compilation
    cache (the default result cache is: a JAX run with any result cache would otherwise make
    the default one refuse itself as a folder of other files), else nothing."""
    home = compilation_cache_dir("jax").parent
    with contextlib.suppress(OSError):
        if home.parent.resolve() == root.resolve():
            return frozenset({home.name})
    return frozenset()
