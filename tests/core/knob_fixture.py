"""A registry with one knob more than segdiff's, and the configuration type that carries it:
the way a new knob (a runtime, a backend) joins every front end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.knobs import KNOBS, KnobRegistry, Variant, switch
from segdiff_gui.core.runtimes import RUNTIMES, Runtime

FASTMATH = switch(
    "fastmath",
    False,
    on="fast",
    title="fast math",
    tooltip="Reassociate floating-point sums for speed.",
    link="https://example.org/fastmath",
    process_level=True,
    variants=(Variant("fast math", True, "On: sums in any order."),),
)
# A knob set at run time, inside a child shared with other configurations (as XLA is).
TILING = switch(
    "tiling",
    False,
    on="tiled",
    title="tiled convolutions",
    tooltip="Convolve in tiles.",
    link="https://example.org/tiling",
)
REGISTRY = KNOBS.with_knob(FASTMATH).with_knob(TILING)
# TensorFlow takes both; every other runtime was not told of them, and refuses them.
TAKEN = {
    **RUNTIMES,
    "tensorflow": replace(
        RUNTIMES["tensorflow"], takes=RUNTIMES["tensorflow"].takes | {"fastmath", "tiling"}
    ),
}


@dataclass(frozen=True, order=True)
class FastConfig(RunConfig):
    fastmath: bool = False
    tiling: bool = False
    knobs: ClassVar[KnobRegistry] = REGISTRY
    runtimes: ClassVar[Mapping[str, Runtime]] = TAKEN  # normalised by its own registry
