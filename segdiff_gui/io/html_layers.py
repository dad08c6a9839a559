"""The report's layer sections: each stored layer probe between two of the study's runs (its
sentences, the table of ``segdiff layers`` and an inline SVG chart of the relative error per
layer, log scale, the first differing layer marked) and each precision repair (the layers
kept in float32, the flips before and after, and the Keras code)."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from segdiff_gui.core.layer_stats import LAYER_COLUMNS, QUANT_COLUMNS, LayerStats, layer_cells

__all__ = ["layer_probe_sections", "repair_sections"]

_FLOOR = 1e-12  # an exactly equal layer, on the log scale


def _chart(layers: list[LayerStats], first: str | None) -> str:
    if not layers:
        return ""
    width, height, left, bottom = 720, 240, 60, 30
    errors = [
        _FLOOR if not 0 < layer.relative_error < math.inf else layer.relative_error
        for layer in layers
    ]
    low = math.floor(math.log10(min(errors)))
    high = max(math.ceil(math.log10(max(errors))), low + 1)

    def x(index: int) -> float:
        return left + (index + 0.5) * (width - left - 10) / len(layers)

    def y(value: float) -> float:
        return 10 + (high - math.log10(value)) / (high - low) * (height - bottom - 10)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-size="11" font-family="sans-serif">'
    ]
    for power in range(low, high + 1):
        parts.append(
            f'<line x1="{left}" y1="{y(10.0**power):.1f}" x2="{width - 10}" '
            f'y2="{y(10.0**power):.1f}" stroke="#eee"/><text x="{left - 6}" '
            f'y="{y(10.0**power) + 4:.1f}" text-anchor="end">1e{power}</text>'
        )
    points = " ".join(f"{x(i):.1f},{y(e):.1f}" for i, e in enumerate(errors))
    parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{points}"/>')
    for index, (layer, error) in enumerate(zip(layers, errors, strict=True)):
        colour = "#d62728" if layer.name == first else "#1f77b4"
        parts.append(
            f'<circle cx="{x(index):.1f}" cy="{y(error):.1f}" r="3" fill="{colour}">'
            f"<title>{escape(layer.name)}: {layer.relative_error:.3g}</title></circle>"
        )
    if first is not None:
        index = next(i for i, layer in enumerate(layers) if layer.name == first)
        parts.append(
            f'<line x1="{x(index):.1f}" y1="10" x2="{x(index):.1f}" y2="{height - bottom}" '
            f'stroke="#d62728" stroke-dasharray="4 3"/><text x="{x(index) + 4:.1f}" y="20" '
            f'fill="#d62728">first differs: {escape(first)}</text>'
        )
    parts.append(
        f'<text x="{(left + width) / 2}" y="{height - 6}" text-anchor="middle">layers in '
        "execution order (relative error ‖Δ‖/‖ref‖, log scale)</text></svg>"
    )
    return "".join(parts)


def _table(layers: list[LayerStats], first: str | None) -> str:
    quantized = any(layer.scale for layer in layers)  # the user's int8 artefact's scales
    head = "".join(
        f"<th>{escape(h)}</th>" for h in LAYER_COLUMNS + (QUANT_COLUMNS if quantized else ())
    )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(c)}</td>" for c in layer_cells(i, layer, layer.name == first, quantized)
        )
        + "</tr>"
        for i, layer in enumerate(layers)
    )
    return f'<div class="wide"><table><tr>{head}</tr>{rows}</table></div>'


def layer_probe_sections(probes: list[dict[str, Any]]) -> str:
    if not probes:
        return ""
    parts = ["<h2>Where in the network (layer probes)</h2>"]
    for probe in probes:
        layers = [LayerStats.from_dict(item) for item in probe["layers"]]
        first = probe.get("first_differing")
        title = f"{probe['reference']['label']} → {probe['other']['label']}"
        sentences = "".join(f"<li>{escape(line)}</li>" for line in probe["sentences"])
        parts.append(
            f"<h3>{escape(title)}</h3><ul>{sentences}</ul>{_chart(layers, first)}"
            f"{_table(layers, first)}"
        )
    return "".join(parts)


def repair_sections(repairs: list[dict[str, Any]]) -> str:
    if not repairs:
        return ""
    parts = ["<h2>Precision repair</h2>"]
    for repair in repairs:
        sentences = "".join(f"<li>{escape(line)}</li>" for line in repair["sentences"])
        parts.append(f"<ul>{sentences}</ul>")
        if repair.get("code"):
            parts.append(
                "<p>Apply it to the model (Keras):</p>"
                f'<pre style="background:#f6f6f6;padding:8px;overflow-x:auto">'
                f"{escape(repair['code'])}</pre>"
            )
    return "".join(parts)
