"""Exact numbers for people: float32 values as the shortest round-trip text plus their bits.

``%g`` and friends hide one-ULP differences; these strings never do.
"""

from __future__ import annotations

import numpy as np

__all__ = ["float32_bits", "format_float32"]


def format_float32(value: float | np.floating) -> str:
    """Shortest text that reads back as the same float32 (``0.549857``, not ``0.5498570204``)."""
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


def float32_bits(value: float | np.floating) -> str:
    """The float32 bit pattern as hex: ``0x3f0cc3a1``."""
    return f"0x{int(np.array(value, dtype=np.float32).view(np.uint32)):08x}"
