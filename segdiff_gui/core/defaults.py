"""Defaults every front end shares, written once: the CLI's flags, the window's controls, the
run request and the analysis all read them here."""

from __future__ import annotations

__all__ = [
    "DEFAULT_CALIBRATION_IMAGES",
    "DEFAULT_CUTOFF",
    "DEFAULT_LAYER_DISK_BUDGET",
    "DEFAULT_LAYER_MEMORY_BUDGET",
    "DEFAULT_PARALLEL_CHILDREN",
    "DEFAULT_REPEATS",
    "DEFAULT_TIMEOUT_S",
]

# Class cutoff for sigmoid maps: class = p >= cutoff.
DEFAULT_CUTOFF = 0.5
# Runs of each configuration: two, so that nondeterminism shows without being asked for.
DEFAULT_REPEATS = 2
# A child that reports nothing for this long (import, model load, one run) is killed.
DEFAULT_TIMEOUT_S = 600.0
# Engine children at once: a second group's child starts its runtime's import
# (seconds, mostly one core) while the first computes; never two on one GPU.
DEFAULT_PARALLEL_CHILDREN = 2
# The layer probe: bytes of layer tensors one comparison holds at once, and bytes
# of probes' layer tensors a cache keeps (least recently used removed first).
DEFAULT_LAYER_MEMORY_BUDGET = 512 << 20
DEFAULT_LAYER_DISK_BUDGET = 2 << 30
# Full int8 conversion: at most this many of the set's images calibrate it
# (LiteRT's guide suggests about a hundred representative samples).
DEFAULT_CALIBRATION_IMAGES = 100
