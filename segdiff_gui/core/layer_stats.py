"""How two configurations' outputs of one layer differ, and where along the network a
difference is born and grows (issue 15's layer probe). Pure numpy: a probe streams its layers
through :func:`compare_layer` one at a time, so memory stays at one layer of each side.

A layer's figures: shape, max and mean |Δ|, max ULP (float32 steps; a low-precision layer is
widened exactly first), relative error ‖Δ‖₂/‖ref‖₂, SNR in dB (10·log₁₀ ‖ref‖²/‖Δ‖²), the
fraction of elements that differ, and NaN/Inf counts on either side. Elements that are NaN in
either side take no part in the arithmetic figures; they are counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import ulp_distance

__all__ = ["LayerComparison", "LayerStats", "compare_layer", "compare_layers"]


@dataclass(frozen=True)
class LayerStats:
    name: str
    shape: tuple[int, ...]
    max_abs: float
    mean_abs: float
    max_ulp: int
    relative_error: float  # 0 when both sides agree; inf when the reference is all zeros
    snr_db: float  # inf when the sides agree bit for bit in value
    differing_fraction: float
    nan: tuple[int, int]  # NaN elements in (reference, other)
    inf: tuple[int, int]  # ±Inf elements in (reference, other)

    @property
    def differs(self) -> bool:
        return self.differing_fraction > 0 or self.nan[0] != self.nan[1] or self.inf != (0, 0)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = list(self.shape)
        # JSON has no infinity: an exact agreement's SNR and a zero reference's error as None.
        for name in ("relative_error", "snr_db"):
            if math.isinf(data[name]):
                data[name] = None
        return data


def _counts(values: np.ndarray) -> tuple[int, int]:
    return int(np.isnan(values).sum()), int(np.isinf(values).sum())


def compare_layer(name: str, reference: np.ndarray, other: np.ndarray) -> LayerStats:
    """The figures of one layer's output under two configurations (same shape)."""
    if reference.shape != other.shape:
        raise ValueError(f"layer {name}: shapes differ ({reference.shape} vs {other.shape})")
    ref32 = np.asarray(reference, dtype=np.float32)  # bfloat16 and float16 widen exactly
    oth32 = np.asarray(other, dtype=np.float32)
    ref_nan, ref_inf = _counts(ref32)
    oth_nan, oth_inf = _counts(oth32)
    usable = np.isfinite(ref32) & np.isfinite(oth32)
    ulps = ulp_distance(ref32, oth32)
    differing = int(np.count_nonzero(ulps))
    size = max(ref32.size, 1)
    if usable.any():
        a = ref32[usable].astype(np.float64)
        delta = oth32[usable].astype(np.float64) - a
        magnitude = np.abs(delta)
        max_abs, mean_abs = float(magnitude.max()), float(magnitude.mean())
        delta_energy, ref_energy = float(np.dot(delta, delta)), float(np.dot(a, a))
        max_ulp = int(ulps[usable].max())
    else:
        max_abs = mean_abs = delta_energy = ref_energy = 0.0
        max_ulp = 0
    if delta_energy == 0.0:
        relative, snr = 0.0, math.inf
    elif ref_energy == 0.0:
        relative, snr = math.inf, -math.inf
    else:
        relative = math.sqrt(delta_energy / ref_energy)
        snr = 10.0 * math.log10(ref_energy / delta_energy)
    return LayerStats(
        name=name,
        shape=tuple(int(d) for d in reference.shape),
        max_abs=max_abs,
        mean_abs=mean_abs,
        max_ulp=max_ulp,
        relative_error=relative,
        snr_db=snr,
        differing_fraction=differing / size,
        nan=(ref_nan, oth_nan),
        inf=(ref_inf, oth_inf),
    )


@dataclass(frozen=True)
class LayerComparison:
    """Every layer's figures in execution order, and what they say together."""

    layers: tuple[LayerStats, ...]

    @property
    def first_differing(self) -> LayerStats | None:
        """The first layer, in execution order, whose output differs at all."""
        return next((layer for layer in self.layers if layer.differs), None)

    def amplification(self) -> list[tuple[LayerStats, float]]:
        """Layers by how much they grow the difference: the ratio of a layer's relative error
        to the previous layer's (where both are finite and the previous one is not zero),
        largest first. A layer where the difference is born has no ratio: see
        :attr:`first_differing`."""
        ratios = []
        for previous, layer in zip(self.layers, self.layers[1:], strict=False):
            before, after = previous.relative_error, layer.relative_error
            if 0.0 < before < math.inf and after < math.inf:
                ratios.append((layer, after / before))
        return sorted(ratios, key=lambda item: item[1], reverse=True)

    def to_dict(self) -> dict[str, Any]:
        first = self.first_differing
        return {
            "layers": [layer.to_dict() for layer in self.layers],
            "first_differing": first.name if first else None,
            "amplifying": [
                {"layer": layer.name, "ratio": ratio} for layer, ratio in self.amplification()[:5]
            ],
        }


def compare_layers(pairs: Iterable[tuple[str, np.ndarray, np.ndarray]]) -> LayerComparison:
    """Compare ``(name, reference, other)`` layer by layer; ``pairs`` may be a generator that
    reads each layer only when asked, so one layer of each side is in memory at a time."""
    return LayerComparison(tuple(compare_layer(name, a, b) for name, a, b in pairs))
