"""A registry with one knob more than segdiff's, and the configuration type that carries it:
the way a new knob (a runtime, a backend) joins every front end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.knobs import KNOBS, KnobRegistry, Variant, switch

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


@dataclass(frozen=True, order=True)
class FastConfig(RunConfig):
    fastmath: bool = False
    tiling: bool = False
    knobs: ClassVar[KnobRegistry] = REGISTRY

    def __post_init__(self) -> None:
        super().__post_init__()
        REGISTRY.normalise(self)
