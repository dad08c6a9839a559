"""Exact numbers for people: float32 values as the shortest round-trip text plus their bits.

``%g`` and friends hide one-ULP differences; these strings never do. And numbers for
machines: JSON that every parser reads (:func:`json_text`).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "as_float32",
    "float32_bits",
    "float64_bits",
    "format_float32",
    "format_float64",
    "fraction_text",
    "json_text",
]


def format_float32(value: float | np.floating) -> str:
    """Shortest text that reads back as the same float32 (``0.549857``, not ``0.5498570204``)."""
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


def as_float32(value: float | np.floating) -> float:
    """The float32 that ``value`` rounds to, as the number :func:`format_float32` writes
    (``0.5500041246414185`` → ``0.5500041``): a cutoff as the flips are counted at it, which
    JSON and every sentence then give alike."""
    return float(format_float32(value))


def float32_bits(value: float | np.floating) -> str:
    """The float32 bit pattern as hex: ``0x3f0cc3a1``."""
    return f"0x{int(np.array(value, dtype=np.float32).view(np.uint32)):08x}"


def format_float64(value: float | np.floating) -> str:
    """Shortest text that reads back as the same float64: the exact (float64) map's value."""
    return np.format_float_positional(np.float64(value), unique=True, trim="-")


def float64_bits(value: float | np.floating) -> str:
    """The float64 bit pattern as hex: ``0x3fe199999999999a``."""
    return f"0x{int(np.array(value, dtype=np.float64).view(np.uint64)):016x}"


def fraction_text(value: float) -> str:
    """A scale or divisor as an option takes it: ``1/255`` where that fraction is the float
    exactly, else the float's shortest text (both read back as the very float)."""
    fraction = Fraction(value).limit_denominator(1 << 20)
    return str(fraction) if float(fraction) == value else repr(value)


def json_text(value: object, indent: int | None = 2) -> str:
    """``value`` as JSON that every parser reads (RFC 8259 has no NaN or infinity): a float
    that is not finite, which Python writes as a bare ``NaN`` or ``Infinity`` that other
    parsers refuse, is the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (``float()``
    and JavaScript's ``Number()`` read each back); what JSON has no type for, its ``str``."""
    return json.dumps(_finite(value), indent=indent, default=str, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
