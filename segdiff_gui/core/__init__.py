"""Pure numpy + stdlib: configurations, hashing, analysis, formatting, progress messages."""

from segdiff_gui.core.analysis import MapComparison, class_map, compare_maps, ulp_distance
from segdiff_gui.core.config import (
    ConfigError,
    OutputSelection,
    Preprocessing,
    RunConfig,
    parse_config_spec,
    parse_preprocessing,
)
from segdiff_gui.core.floatfmt import float32_bits, format_float32

__all__ = [
    "ConfigError",
    "MapComparison",
    "OutputSelection",
    "Preprocessing",
    "RunConfig",
    "class_map",
    "compare_maps",
    "float32_bits",
    "format_float32",
    "parse_config_spec",
    "parse_preprocessing",
    "ulp_distance",
]
