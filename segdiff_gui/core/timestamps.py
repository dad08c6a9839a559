"""One timestamp format for provenance and bundles: local time with its UTC offset."""

from __future__ import annotations

import time

__all__ = ["local_timestamp"]


def local_timestamp() -> str:
    """``2026-11-29T17:08:01+0000``: sortable, and says which clock it was read from."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
