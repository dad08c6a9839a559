"""One self-contained HTML file (pictures embedded as PNG data and inline SVG) that a user can
attach to a bug report: what was compared, how the maps differ, and where they ran."""

from __future__ import annotations

import base64
import io
import json
import math
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from segdiff_gui.core.analysis import class_map, difference_map, flips_heading
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.io.colormaps import diverging, viridis
from segdiff_gui.io.html_layers import layer_probe_sections, repair_sections
from segdiff_gui.io.pictures import picture_rgb

__all__ = ["study_fragment", "write_html_report"]

_CLASS_COLOURS = np.array(
    [[20, 20, 20], [86, 180, 233], [230, 159, 0], [0, 158, 115], [240, 228, 66], [204, 121, 167]],
    dtype=np.uint8,
)
_CLASS_NAMES = ("black", "sky blue", "orange", "green", "yellow", "pink")
_LINE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
_PROVENANCE_FIELDS = (
    ("device", "device"),
    ("device_description", "device model"),
    ("tf_version", "TensorFlow"),
    ("keras_version", "Keras"),
    ("cuda_version", "CUDA (build)"),
    ("cudnn_version", "cuDNN (build)"),
    ("onednn_in_effect", "oneDNN"),
    ("inference_precision_in_effect", "inference precision"),
    ("session_settings_in_effect", "runtime settings"),
    ("op_determinism", "op determinism"),
    ("tf32_enabled", "TF32"),
    ("emulation", "emulated on the CPU"),
    ("intra_op_threads", "intra-op threads"),
    ("xla", "XLA"),
    ("compute_dtype", "compute dtype"),
    ("input_batch_shape", "batch shape"),
    ("cpu_model", "CPU"),
    ("hostname", "host"),
    ("environment", "environment"),
    ("wall_time_s", "inference s"),
    ("timestamp", "when"),
)
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}.pics{display:flex;flex-wrap:wrap;gap:16px}
figure{margin:0}figure img{width:360px;image-rendering:pixelated;border:1px solid #ccc}
figcaption{font-size:12px;color:#555;max-width:360px}.small{font-size:12px;color:#555}
.wide{overflow-x:auto}
"""


def _png(rgb: np.ndarray, optimize: bool = True) -> str:
    """PNG data for an ``<img>``; ``optimize`` (a report kept with a bug report) makes the
    file smaller at several times the encoding time, which a notebook cell does not spend."""
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG", optimize=optimize)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _figure(rgb: np.ndarray, caption: str, width: int | None = None) -> str:
    """A picture with its caption; ``width`` in pixels, inline (a notebook cell has no style
    sheet of ours), else the report's style sheet sizes it."""
    if width is None:
        return (
            f'<figure><img alt="{escape(caption)}" src="{_png(rgb)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    return (
        f'<figure style="margin:0"><img alt="{escape(caption)}" src="{_png(rgb, False)}" '
        f'style="width:{width}px;image-rendering:pixelated;border:1px solid #ccc">'
        f'<figcaption style="font-size:11px;color:#555;max-width:{width}px">'
        f"{escape(caption)}</figcaption></figure>"
    )


def _input_picture(image: np.ndarray | None, shape: tuple[int, int], factor: int) -> np.ndarray:
    """The input image in its colours, dimmed so that the marks over it stand out, at the
    map's size reduced by ``factor`` (the map's ``[::factor, ::factor]``); black where there
    is none."""
    size = (-(-shape[0] // factor), -(-shape[1] // factor))
    if image is None:
        return np.zeros((*size, 3), dtype=np.uint8)
    if image.shape[:2] == shape:
        return picture_rgb(image[::factor, ::factor], brightest=200)
    # The model resized it: shown at the map's size, as its pixels were computed.
    return np.array(Image.fromarray(picture_rgb(image, brightest=200)).resize(size[::-1]))


def _shrink(data: np.ndarray, factor: int, how: str) -> np.ndarray:
    """``data`` (height × width) smaller by ``factor`` in blocks: their ``mean``, the value of
    largest size (``absmax``, NaN-free), ``any`` (one flipped pixel keeps its block red) or a
    ``sample`` of each. A thumbnail must not hide the one pixel that matters."""
    if factor <= 1:
        return data
    if how == "sample":
        return data[::factor, ::factor]
    pad = ((0, -data.shape[0] % factor), (0, -data.shape[1] % factor))
    padded = np.pad(data, pad, mode="edge")
    blocks = padded.reshape(
        padded.shape[0] // factor, factor, padded.shape[1] // factor, factor
    ).swapaxes(1, 2)
    flat = blocks.reshape(*blocks.shape[:2], -1)
    if how == "any":
        return np.asarray(flat.any(axis=-1))
    if how == "mean":
        return np.asarray(flat.mean(axis=-1), dtype=data.dtype)
    values = np.nan_to_num(flat)
    largest = np.abs(values).argmax(axis=-1)[..., None]
    return np.take_along_axis(values, largest, axis=-1)[..., 0]


def _pictures(
    study: GroupAnalysis,
    image: np.ndarray | None,
    width: int | None = None,
    image_unreadable: bool = False,
) -> str:
    """The reference, the largest difference and the flips; with ``width`` (a notebook's
    small pictures) each at most twice that many pixels across, reduced in blocks.
    ``image_unreadable``: a stored input image could not be read (said under the flips)."""
    ref = study.reference.probabilities
    factor = 1 if width is None else max(1, math.ceil(max(ref.shape[:2]) / (2 * width)))
    figures = []
    if study.multiclass:
        classes = _shrink(class_map(ref, study.cutoff), factor, "sample") % len(_CLASS_COLOURS)
        count = min(ref.shape[-1], len(_CLASS_COLOURS))
        legend = ", ".join(f"{i} {_CLASS_NAMES[i]}" for i in range(count))
        caption = f"reference classes ({study.reference.label}): {legend}"
        figures.append(_figure(_CLASS_COLOURS[classes], caption, width))
    else:
        binary = _shrink(ref[..., 0] if ref.ndim == 3 else ref, factor, "mean")
        caption = f"reference map {study.reference.label}, 0 → 1"
        figures.append(_figure(viridis(binary), caption, width))
    if study.others:
        worst = max(
            study.others,
            key=lambda r: (study.comparisons[r.key].flips, study.comparisons[r.key].max_abs),
        )
        diff = difference_map(ref, worst.probabilities)
        if diff.ndim == 3:  # per pixel, the class change of largest size, with its sign
            largest = np.nanargmax(np.abs(np.nan_to_num(diff)), axis=-1)[..., None]
            diff = np.take_along_axis(diff, largest, axis=-1)[..., 0]
        limit = float(np.nanmax(np.abs(diff), initial=0.0))
        diff = _shrink(diff, factor, "absmax")
        figures.append(
            _figure(
                diverging(diff, limit),
                f"{worst.label} − reference: blue −{limit:.3g} … red +{limit:.3g}",
                width,
            )
        )
        overlay = _input_picture(image, ref.shape[:2], factor)
        amber = np.array([255.0, 200.0, 0.0])
        risky = _shrink(study.at_risk, factor, "any")
        overlay[risky] = (overlay[risky] * 0.4 + amber * 0.6).astype(np.uint8)
        overlay[_shrink(study.any_flips(), factor, "any")] = [255, 0, 40]
        under = "black: the input image could not be read" if image_unreadable else "input image"
        caption = f"{under}; red: pixels that flip in any run, amber: at-risk pixels"
        figures.append(_figure(overlay, caption, width))
    inline = ' style="display:flex;flex-wrap:wrap;gap:12px"' if width is not None else ""
    return f'<div class="pics"{inline}>' + "".join(figures) + "</div>"


def _curve_svg(data: dict[str, Any]) -> str:
    curves = data["flip_curves"]
    if not curves:
        return "<p>Multi-class maps flip on argmax; no cutoff curve applies.</p>"
    cutoffs = curves["cutoffs"]
    series = {label: values for label, values in curves.items() if label != "cutoffs"}
    top = max([max(values) for values in series.values()] + [1])
    # Log scale: a few hundred flips near 0.5 must stay visible beside thousands near 0 or 1.
    decades = max(1, math.ceil(math.log10(1 + top)))
    width, height, left, bottom = 720, 300, 56, 36

    def x(t: float) -> float:
        return left + t * (width - left - 12)

    def y(count: float) -> float:
        return 10 + (1 - math.log10(1 + count) / decades) * (height - bottom - 10)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-size="11" font-family="sans-serif">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{x(tick)}" y1="{y(0)}" x2="{x(tick)}" y2="{y(10**decades)}" '
            f'stroke="#eee"/><text x="{x(tick)}" y="{y(0) + 14}" '
            f'text-anchor="middle">{tick:g}</text>'
        )
    for power in range(decades + 1):
        count = 0 if power == 0 else 10**power
        parts.append(
            f'<line x1="{left}" y1="{y(count)}" x2="{x(1)}" y2="{y(count)}" '
            f'stroke="#f2f2f2"/><text x="{left - 6}" y="{y(count) + 4}" '
            f'text-anchor="end">{count:,}</text>'
        )
    parts.append(
        f'<text x="{x(0.5)}" y="{height - 4}" text-anchor="middle">cutoff '
        "(flipped pixels, log scale)</text>"
    )
    for index, (label, values) in enumerate(series.items()):
        colour = _LINE_COLOURS[index % len(_LINE_COLOURS)]
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(cutoffs, values, strict=True))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
            f'points="{points}"><title>{escape(label)}</title></polyline>'
        )
        parts.append(
            f'<text x="{width - 14}" y="{22 + 14 * index}" text-anchor="end" '
            f'fill="{colour}">{escape(label)}</text>'
        )
    cut = data["cutoff"]
    parts.append(
        f'<line x1="{x(cut)}" y1="{y(0)}" x2="{x(cut)}" y2="{y(top)}" stroke="#000" '
        f'stroke-dasharray="4 3"/><text x="{x(cut) + 4}" y="{y(top) + 10}">'
        f"cutoff {format_float32(cut)}</text></svg>"
    )
    parts.append(
        f'<p class="small">Sampled at {len(cutoffs)} cutoffs; the table above gives '
        "the exact count at the operating cutoff.</p>"
    )
    return "".join(parts)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _summary_table(data: dict[str, Any]) -> str:
    """Every run against the reference; values NaN in one map only (no ULP or |Δ| counts
    them) in a column of their own where a run has any, as the terminal's table has them."""
    flips = flips_heading(data["cutoff"], data["kind"] == "softmax")
    nans = any(r["nan_mismatches"] for r in data["comparisons"])
    rows = [
        [
            r["label"],
            "equal" if r["bitwise_equal"] else "differs",
            f"{r['differing_pixels']:,} / {r['pixels']:,}",
            f"{r['max_ulp']:,}",
            f"{r['max_abs']:.3g}",
            f"{r['mean_abs']:.3g}",
            ", ".join(map(str, r["max_location"])) if r["max_location"] else "—",
            f"{r['flips']:,}",
            *([f"{r['nan_mismatches']:,}"] if nans else []),
        ]
        for r in data["comparisons"]
    ]
    return _table(
        [
            "run",
            "bitwise",
            "differing pixels",
            "max ULP",
            "max |Δ|",
            "mean |Δ|",
            "largest at (row, col[, class])",
            flips,
            *(["NaN in one only"] if nans else []),
        ],
        rows,
    )


def _exact_section(exact: dict[str, Any] | None) -> str:
    """Every run against the exact (float64) run, and which side of each flip is right
    (``ExactSummary.to_dict``); nothing without an exact run."""
    if not exact:
        return ""
    rows = [
        [
            e["label"],
            f"{e['max_abs']:.3g}",
            f"{e['mean_abs']:.3g}",
            f"{e['max_ulp']:,}",
            f"{e['within_one_ulp']:,} / {e['pixels']:,}",
            f"{e['wrong']:,}",
            f"{e['wrong_tied']:,}",
            f"{e['undecidable']:,}",
        ]
        for e in exact["errors"]
    ]
    table = _table(
        [
            "run",
            "max |Δ|",
            "mean |Δ|",
            "max ULP from exact",
            "pixels within 1 ULP",
            "wrong classes",
            "of them tied",
            "of them undecidable",
        ],
        rows,
    )
    sentences = "".join(f"<li>{escape(f['sentence'])}</li>" for f in exact["flips"] if f["flips"])
    return (
        f"<p>Against the exact run <b>{escape(exact['run'])}</b> (the model in float64, "
        "beside the reference): ULPs count float32 steps from the exact value rounded to "
        "float32; a class is wrong where the run's is another or its top classes are tied "
        "(no class decided), and undecidable where the exact value lies within 1 float32 ULP "
        f"of the cutoff.</p>{table}" + (f"<ul>{sentences}</ul>" if sentences else "")
    )


def _verdict_items(determinism: dict[str, str], at_risk: str) -> str:
    verdicts = "".join(f"<li>{escape(name)}: {escape(v)}</li>" for name, v in determinism.items())
    return f"<ul>{verdicts or '<li>no repeats</li>'}<li>{escape(at_risk)}</li></ul>"


def study_fragment(
    study: GroupAnalysis, image: np.ndarray | None, heading: str, picture_width: int = 200
) -> str:
    """A study in a notebook cell: its heading, every run against the reference, the repeats'
    verdicts and the at-risk pixels, and small pictures (the reference, the largest difference,
    the flips). Self-contained like the report: pictures are PNG data, styles inline, no
    script and nothing fetched."""
    data = {
        "kind": "softmax" if study.multiclass else "sigmoid",
        "cutoff": study.cutoff,
        "comparisons": study.rows(),
    }
    rule = "argmax" if study.multiclass else f"cutoff {format_float32(study.cutoff)}"
    count = len(study.runs)
    lead = (
        f"<p><b>{escape(heading)}</b>: {count} run{'' if count == 1 else 's'} against "
        f"<b>{escape(study.reference.label)}</b>, class rule {rule}.</p>"
    )
    if not study.others:
        return f"<div>{lead}<p>Only the reference: nothing to compare with.</p></div>"
    determinism = {name: v.sentence() for name, v in study.verdicts.items()}
    exact = study.exact_summary()
    return (
        f"<div>{lead}{_summary_table(data)}"
        f"{_verdict_items(determinism, study.at_risk_sentence())}"
        f"{_exact_section(exact.to_dict() if exact else None)}"
        f"{_pictures(study, image, picture_width)}</div>"
    )


def _provenance_tables(data: dict[str, Any]) -> str:
    """What all runs share, once; then what differs between them, a row per run."""
    runs = data["runs"]
    shared: list[tuple[str, list[str]]] = []
    varying: list[tuple[str, list[str]]] = []
    for name, title in _PROVENANCE_FIELDS:
        values = [_cell(run["provenance"].get(name, "")) for run in runs]
        (shared if len(set(values)) == 1 else varying).append((title, values))
    common = _table(["shared by every run", ""], [[title, values[0]] for title, values in shared])
    if not varying:
        return common
    rows = [[run["label"]] + [values[i] for _, values in varying] for i, run in enumerate(runs)]
    return common + _table(["run", *[title for title, _ in varying]], rows)


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _settings_paragraph(data: dict[str, Any]) -> str:
    """How the images became the model's input and which output is the map: a bug report
    must say it (the same runs under other settings are other runs)."""
    settings = data.get("settings") or {}
    items = [
        f"{name} <b>{escape(json.dumps(value))}</b>"
        for part in ("preprocessing", "output")
        for name, value in (settings.get(part) or {}).items()
    ]
    if not items:
        return ""
    group = f" (group {escape(str(data['group']))})" if data.get("group") else ""
    return f"<p>Model settings{group}: {', '.join(items)}.</p>"


def _exact_heading(data: dict[str, Any]) -> str:
    return "<h2>Which answer is right?</h2>" if data.get("exact") else ""


def write_html_report(
    path: str | Path,
    data: dict[str, Any],
    study: GroupAnalysis,
    image: np.ndarray | None,
    image_unreadable: bool = False,
) -> Path:
    """Write the report; ``image`` is the target image for the flip overlay (or ``None``:
    none stored, or, with ``image_unreadable``, a stored one that could not be read)."""
    pairwise = data["pairwise"]
    pair_rows = [
        [label] + [f"{u:,} / {f:,}" for u, f in zip(ulps, flips, strict=True)]
        for label, ulps, flips in zip(
            pairwise["labels"], pairwise["max_ulp"], pairwise["flips"], strict=True
        )
    ]
    determinism = {name: v["verdict"] for name, v in data["determinism"].items()}
    at_risk = data["at_risk"]
    cutoff = (
        "" if data["kind"] == "softmax" else f" at cutoff <b>{format_float32(data['cutoff'])}</b>"
    )
    title = f"segdiff report: {data.get('model', '')} on {data.get('image', '')}"
    html = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{escape(title)}</title><style>{_STYLE}</style></head><body>
<h1>{escape(title)}</h1>
<p>Reference run <b>{escape(data["reference"]["label"])}</b>; class rule
{escape(data["class_rule"])}{cutoff}. Made by segdiff
{escape(data["segdiff_version"])} on {escape(data["created"])}.</p>
{_settings_paragraph(data)}
<h2>Every run against the reference</h2>{_summary_table(data)}
<h2>Determinism and risk</h2>{_verdict_items(determinism, at_risk["sentence"])}
{_exact_heading(data)}{_exact_section(data.get("exact"))}
<h2>Pictures</h2>{_pictures(study, image, image_unreadable=image_unreadable)}
<h2>Flips as a function of the cutoff</h2>{_curve_svg(data)}
<h2>Every pair of runs (max ULP / flips)</h2>{_table(["", *pairwise["labels"]], pair_rows)}
{layer_probe_sections(data.get("layer_probes", []))}{repair_sections(data.get("repairs", []))}
<h2>Where each run ran</h2><div class="wide">{_provenance_tables(data)}</div>
<p class="small">Values are float32 probability maps cached bit-exactly; ULP distances are
computed from the bit patterns.</p></body></html>"""
    path = Path(path)
    path.write_text(html, encoding="utf-8")
    return path
