"""Draw segdiff's icon: a small probability map (viridis tiles, a blob in the middle) in which
one tile sits exactly at the cutoff and flips, split between its two classes and ringed.

Run: ``python resources/make_icons.py``. Writes ``segdiff.svg`` and PNGs at the hicolor sizes
into ``segdiff_gui/resources/icons/`` (the wheel, the desktop files and the window use them).
Deterministic: the same script gives the same files.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "segdiff_gui" / "resources" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
# Viridis at nine stops: the colours of the probability view.
VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962",
           "#addc30", "#fde725"]  # fmt: skip
GRID, TILE, GAP, ORIGIN = 5, 36, 4, 30


def _colour(value: float) -> str:
    return VIRIDIS[min(len(VIRIDIS) - 1, max(0, round(value * (len(VIRIDIS) - 1))))]


def svg() -> str:
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256" viewBox="0 0 256 256">',
        "<title>segdiff</title>",
        '<rect x="8" y="8" width="240" height="240" rx="44" fill="#1d1b2c"/>',
    ]
    flip = (1, 3)  # row, column of the tile that changes class
    for row in range(GRID):
        for column in range(GRID):
            # A soft blob: high in the middle, falling off towards the corners.
            distance = math.hypot(row - 2.2, column - 1.8) / 3.2
            value = max(0.0, 1.0 - distance**1.6)
            x, y = ORIGIN + column * (TILE + GAP), ORIGIN + row * (TILE + GAP)
            tile = f'x="{x}" y="{y}" width="{TILE}" height="{TILE}" rx="6"'
            if (row, column) == flip:
                # Split along the diagonal: background below, foreground above.
                corner = f"M{x + TILE} {y}V{y + TILE - 6}a6 6 0 0 1 -6 6H{x}Z"
                parts.append(f'<rect {tile} fill="{VIRIDIS[2]}"/>')
                parts.append(f'<path d="{corner}" fill="{VIRIDIS[-1]}"/>')
                continue
            parts.append(f'<rect {tile} fill="{_colour(value)}"/>')
    x, y = ORIGIN + flip[1] * (TILE + GAP), ORIGIN + flip[0] * (TILE + GAP)
    parts.append(
        f'<rect x="{x - 5}" y="{y - 5}" width="{TILE + 10}" height="{TILE + 10}" rx="10" '
        'fill="none" stroke="#ff3fa4" stroke-width="6"/>'
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> int:
    from PySide6.QtCore import QByteArray, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    ICONS.mkdir(parents=True, exist_ok=True)
    text = svg()
    (ICONS / "segdiff.svg").write_text(text, encoding="utf-8")
    app = QGuiApplication.instance() or QGuiApplication(["make_icons", "-platform", "offscreen"])
    renderer = QSvgRenderer(QByteArray(text.encode()))
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        image.save(str(ICONS / f"segdiff-{size}.png"))
    del app
    print(f"wrote segdiff.svg and {len(SIZES)} PNGs to {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
