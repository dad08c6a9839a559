"""How two configurations' outputs of one layer differ, and where along the network a
difference is born and grows (the layer probe). Pure numpy: a probe streams its layers
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
from segdiff_gui.core.text import shape_text

_BLOCK_VALUES = 1 << 20

__all__ = [
    "LAYER_COLUMNS",
    "QUANT_COLUMNS",
    "LayerComparison",
    "LayerStats",
    "compare_layer",
    "compare_layer_blocks",
    "compare_layers",
    "layer_cells",
    "layer_columns",
    "layer_sentences",
    "read_quantization",
    "spatial_difference",
]


def read_quantization(scale: object, zero_point: object) -> tuple[float, int] | None:
    """A quantized tensor's scale and zero point as a file gives them (None: a scale of
    None, not quantized): a finite scale above 0 and an integer zero point within int32's
    range; anything else a ``ValueError`` (or ``OverflowError``)."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError("scale")
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError("scale")
    if isinstance(zero_point, bool) or not isinstance(zero_point, int):
        raise ValueError("zero_point")
    if not -(2**31) <= zero_point < 2**31:
        raise ValueError("zero_point")
    return value, zero_point


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
    # Where the other side's tensor is quantized (the user's int8 artefact): its scale and
    # zero point, so that the error is said in steps of that scale too; and the artefact's
    # node that computed it (Model Explorer's id; "" for a Keras layer's own output).
    scale: float | None = None
    zero_point: int | None = None
    node: str = ""

    @property
    def differs(self) -> bool:
        return self.differing_fraction > 0 or self.nan[0] != self.nan[1] or self.inf != (0, 0)

    @property
    def max_steps(self) -> float | None:
        """max |Δ| in steps of the quantized side's scale (None where not quantized)."""
        return self.max_abs / self.scale if self.scale else None

    @property
    def mean_steps(self) -> float | None:
        """mean |Δ| in steps of the quantized side's scale (None where not quantized)."""
        return self.mean_abs / self.scale if self.scale else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = list(self.shape)
        # JSON has no infinity: an exact agreement's SNR and a zero reference's error as None.
        for name in ("relative_error", "snr_db"):
            if math.isinf(data[name]):
                data[name] = None
        # Written only for a quantized tensor, and for a layer of the user's artefact.
        scale, zero_point, node = data.pop("scale"), data.pop("zero_point"), data.pop("node")
        if scale is not None:
            data.update(scale=scale, zero_point=zero_point)
            data.update(max_steps=self.max_steps, mean_steps=self.mean_steps)
        if node:
            data["node"] = node
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LayerStats:
        """The figures :meth:`to_dict` wrote (``TypeError``, ``ValueError`` or
        ``OverflowError`` for anything else)."""

        def number(name: str, none: float) -> float:
            value = data[name]
            if value is None:
                return none
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(name)
            return float(value)

        def pair(name: str) -> tuple[int, int]:
            first, second = data[name]
            return int(first), int(second)

        if not isinstance(data["name"], str) or not isinstance(data["shape"], list):
            raise TypeError("name")
        relative = data["relative_error"]
        quantization = read_quantization(data.get("scale"), data.get("zero_point"))
        node = data.get("node", "")
        if not isinstance(node, str):
            raise TypeError("node")
        return cls(
            scale=None if quantization is None else quantization[0],
            zero_point=None if quantization is None else quantization[1],
            node=node[:200],
            name=data["name"],
            shape=tuple(int(d) for d in data["shape"]),
            max_abs=number("max_abs", 0.0),
            mean_abs=number("mean_abs", 0.0),
            max_ulp=int(data["max_ulp"]),
            relative_error=number("relative_error", math.inf),
            # None stands for +inf (equal) unless the reference was all zeros (relative None)
            snr_db=number("snr_db", math.inf if relative is not None else -math.inf),
            differing_fraction=number("differing_fraction", 0.0),
            nan=pair("nan"),
            inf=pair("inf"),
        )


class _Totals:
    """What :func:`compare_layer_blocks` gathers block by block."""

    def __init__(self) -> None:
        self.nan = [0, 0]
        self.inf = [0, 0]
        self.differing = self.elements = self.numbers = self.max_ulp = 0
        self.max_abs = self.sum_abs = self.delta_energy = self.ref_energy = 0.0

    def add(self, reference: np.ndarray, other: np.ndarray) -> None:
        ref32 = np.asarray(reference, dtype=np.float32)  # bfloat16 and float16 widen exactly
        oth32 = np.asarray(other, dtype=np.float32)
        for side, values in enumerate((ref32, oth32)):
            self.nan[side] += int(np.isnan(values).sum())
            self.inf[side] += int(np.isinf(values).sum())
        usable = np.isfinite(ref32) & np.isfinite(oth32)
        ulps = ulp_distance(ref32, oth32)
        self.differing += int(np.count_nonzero(ulps))
        self.elements += ref32.size
        if not usable.any():
            return
        a = ref32[usable].astype(np.float64)
        delta = oth32[usable].astype(np.float64) - a
        magnitude = np.abs(delta)
        self.max_abs = max(self.max_abs, float(magnitude.max()))
        self.sum_abs += float(magnitude.sum())
        self.numbers += int(magnitude.size)
        self.delta_energy += float(np.dot(delta, delta))
        self.ref_energy += float(np.dot(a, a))
        self.max_ulp = max(self.max_ulp, int(ulps[usable].max()))

    def stats(self, name: str, shape: tuple[int, ...]) -> LayerStats:
        if self.delta_energy == 0.0:
            relative, snr = 0.0, math.inf
        elif self.ref_energy == 0.0:
            relative, snr = math.inf, -math.inf
        else:
            relative = math.sqrt(self.delta_energy / self.ref_energy)
            snr = 10.0 * math.log10(self.ref_energy / self.delta_energy)
        return LayerStats(
            name=name,
            shape=tuple(int(d) for d in shape),
            max_abs=self.max_abs,
            mean_abs=self.sum_abs / self.numbers if self.numbers else 0.0,
            max_ulp=self.max_ulp,
            relative_error=relative,
            snr_db=snr,
            differing_fraction=self.differing / max(self.elements, 1),
            nan=(self.nan[0], self.nan[1]),
            inf=(self.inf[0], self.inf[1]),
        )


def spatial_difference(reference: np.ndarray, other: np.ndarray) -> np.ndarray | None:
    """Where in the image a layer differs: max |Δ| over channels of an H×W×C output, float32
    (an element that is NaN on one side only counts as infinitely different); None for an
    output that is not an image (a vector, a sequence)."""
    if reference.ndim != 3:
        return None
    ref32 = np.asarray(reference, dtype=np.float32)
    oth32 = np.asarray(other, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(oth32 - ref32)
    same_nan = np.isnan(ref32) & np.isnan(oth32)
    magnitude = np.where(np.isnan(magnitude) & ~same_nan, np.float32(np.inf), magnitude)
    magnitude = np.where(same_nan, np.float32(0.0), magnitude)
    spatial: np.ndarray = magnitude.max(axis=-1).astype(np.float32)
    return spatial


def compare_layer_blocks(
    name: str, shape: tuple[int, ...], blocks: Iterable[tuple[np.ndarray, np.ndarray]]
) -> tuple[LayerStats, np.ndarray | None]:
    """The figures of one layer whose two sides come in matching blocks (rows of the
    output, in order), and its spatial difference map; one block of each side is in memory
    at a time."""
    totals = _Totals()
    rows: list[np.ndarray] = []
    spatial_ok = len(shape) == 3
    for reference, other in blocks:
        if reference.shape != other.shape:
            raise ValueError(f"layer {name}: blocks differ ({reference.shape} vs {other.shape})")
        # In rows of about a million values: the float64 and int64 temporaries stay a few
        # megabytes, whatever the size of the pieces a probe was stored in.
        per_row = max(int(np.prod(reference.shape[1:], dtype=np.int64)), 1)
        step = max(1, _BLOCK_VALUES // per_row) if reference.ndim else 1
        for start in range(0, max(len(reference) if reference.ndim else 1, 1), step):
            part_a = reference[start : start + step] if reference.ndim else reference
            part_b = other[start : start + step] if other.ndim else other
            totals.add(part_a, part_b)
            if spatial_ok and (part := spatial_difference(part_a, part_b)) is not None:
                rows.append(part)
    spatial = np.concatenate(rows, axis=0) if spatial_ok and rows else None
    return totals.stats(name, shape), spatial


def compare_layer(name: str, reference: np.ndarray, other: np.ndarray) -> LayerStats:
    """The figures of one layer's output under two configurations (same shape): the same
    arithmetic, in the same blocks, as a probe's layer stored in one piece."""
    if reference.shape != other.shape:
        raise ValueError(f"layer {name}: shapes differ ({reference.shape} vs {other.shape})")
    return compare_layer_blocks(name, reference.shape, [(reference, other)])[0]


@dataclass(frozen=True)
class LayerComparison:
    """Every layer's figures in execution order, and what they say together."""

    layers: tuple[LayerStats, ...]
    # Layers of the Keras model a converted runtime has no tensor of its own for (fused into
    # the next op, folded away): left out of the comparison, and said.
    unmatched: tuple[str, ...] = ()

    @property
    def quantized(self) -> bool:
        """Whether a side's tensors are quantized (their scale is known)."""
        return any(layer.scale for layer in self.layers)

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
            "unmatched": list(self.unmatched),
        }


def compare_layers(pairs: Iterable[tuple[str, np.ndarray, np.ndarray]]) -> LayerComparison:
    """Compare ``(name, reference, other)`` layer by layer; ``pairs`` may be a generator that
    reads each layer only when asked, so one layer of each side is in memory at a time."""
    return LayerComparison(tuple(compare_layer(name, a, b) for name, a, b in pairs))


def _number(value: float) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.3g}"


def _percent(fraction: float) -> str:
    percent = 100 * fraction
    return f"{percent:.2g} %" if 0 < percent < 0.1 else f"{percent:.1f} %"


LAYER_COLUMNS = ("#", "layer", "shape", "max |Δ|", "mean |Δ|", "max ULP", "rel. error",
                 "SQNR dB", "differ", "NaN/Inf")  # fmt: skip
# Where a side's tensors are quantized (the user's int8 artefact against its source).
QUANT_COLUMNS = ("scale", "zero pt", "max steps", "mean steps")


def layer_columns(comparison: LayerComparison) -> tuple[str, ...]:
    """The columns every front end shows a comparison in: :data:`LAYER_COLUMNS`, and
    :data:`QUANT_COLUMNS` where a side is quantized."""
    return LAYER_COLUMNS + (QUANT_COLUMNS if comparison.quantized else ())


def layer_cells(index: int, layer: LayerStats, first: bool, quantized: bool = False) -> list[str]:
    """One layer as a row of :data:`LAYER_COLUMNS` (and, ``quantized``, of
    :data:`QUANT_COLUMNS`: empty for a tensor kept in float), as every front end shows it
    (▶ marks the first differing layer)."""
    nan_inf = "" if layer.nan == (0, 0) and layer.inf == (0, 0) else (
        f"{layer.nan[0]}/{layer.nan[1]} NaN, {layer.inf[0]}/{layer.inf[1]} Inf"
    )  # fmt: skip
    snr = "equal" if math.isinf(layer.snr_db) and layer.snr_db > 0 else f"{layer.snr_db:.1f}"
    return [
        f"{'▶ ' if first else ''}{index}",
        layer.name,
        shape_text(layer.shape),
        _number(layer.max_abs),
        _number(layer.mean_abs),
        f"{layer.max_ulp:,}",
        _number(layer.relative_error),
        snr,
        _percent(layer.differing_fraction),
        nan_inf,
        *(_quant_cells(layer) if quantized else ()),
    ]


def _quant_cells(layer: LayerStats) -> list[str]:
    if layer.scale is None or layer.max_steps is None or layer.mean_steps is None:
        return ["", "", "", ""]
    return [
        f"{layer.scale:.4g}",
        f"{layer.zero_point}",
        f"{layer.max_steps:.3g}",
        f"{layer.mean_steps:.3g}",
    ]


def _unmatched_sentences(unmatched: tuple[str, ...]) -> list[str]:
    if not unmatched:
        return []
    shown = ", ".join(unmatched[:5]) + (
        f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else ""
    )
    one = len(unmatched) == 1
    return [
        f"{len(unmatched)} {'layer' if one else 'layers'} could not be matched to a tensor of "
        f"{'its' if one else 'their'} own in the converted model (fused into another op, "
        f"folded away, or not found as a tensor of its own), so {'it is' if one else 'they are'} "
        f"not compared: {shown}."
    ]


def layer_sentences(comparison: LayerComparison) -> list[str]:
    """Where the difference is born and where it grows, in sentences."""
    first = comparison.first_differing
    lines = _unmatched_sentences(comparison.unmatched)
    if first is None:
        return [
            "Every layer's output is bit for bit the same under both configurations.",
            *lines,
        ]
    lines = [
        *lines,
        f"The difference is born in {first.name}: {_percent(first.differing_fraction)} of its "
        f"outputs differ, by up to {_number(first.max_abs)} (relative error "
        f"{_number(first.relative_error)}).",
    ]
    growing = [(layer, ratio) for layer, ratio in comparison.amplification() if ratio > 1.0]
    if growing:
        shown = ", ".join(f"{layer.name} (×{ratio:.3g})" for layer, ratio in growing[:3])
        lines.append(f"It grows most in {shown}: relative error over the previous layer's.")
    return lines + _step_sentences(comparison)


def _step_sentences(comparison: LayerComparison) -> list[str]:
    """Where a side is quantized: the layers whose error is more than a step of its scale
    (beyond what rounding to it alone does), the first of them and the largest."""
    quantized = [layer for layer in comparison.layers if layer.max_steps is not None]
    if not quantized:
        return []
    worst = max(quantized, key=lambda layer: layer.max_steps or 0.0)
    beyond = [layer for layer in quantized if (layer.max_steps or 0.0) > 1.0]
    lines = [
        f"In steps of each quantized tensor's own scale, the error is largest in {worst.name}: "
        f"up to {worst.max_steps:.3g} steps of {worst.scale:.3g} (mean {worst.mean_steps:.2g})."
    ]
    if beyond:
        lines.append(
            f"{len(beyond)} of {len(quantized)} quantized layers are more than one step from "
            f"their source (beyond the rounding to their scale alone), the first {beyond[0].name} "
            f"({beyond[0].max_steps:.3g} steps)."
        )
    return lines
