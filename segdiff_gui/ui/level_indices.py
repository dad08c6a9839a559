"""Float planes turned into colour-table indices before pyqtgraph sees them.

Given a float image, pyqtgraph rescales it to colour indices on every render with a generic
``nditer`` loop: 0.2–0.8 s for each 8192×8192 view on the 2-core reference machine, four views
at a time. Handed uint8 indices and a 256-colour table instead, it draws them as an indexed
image with no per-pixel work. The indices are the ones pyqtgraph would compute
(``clip((v - low) * 256 / (high - low), 0, 255)``, truncated), worked out block by block so the
float temporaries stay in cache.
"""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.analysis import row_blocks

__all__ = ["COLOURS", "level_indices"]

COLOURS = 256


def level_indices(plane: np.ndarray, levels: tuple[float, float]) -> np.ndarray | None:
    """``plane`` as uint8 indices into a :data:`COLOURS`-entry table spanning ``levels``, or
    None when it holds NaN (pyqtgraph then draws those pixels transparent from the floats)."""
    low, high = levels
    span = (high - low) or 1.0
    # Python floats keep the arithmetic in float32, as pyqtgraph's own rescaling does.
    offset, scale = float(low), float(COLOURS / span)
    indices = np.empty(plane.shape, dtype=np.uint8)
    for block in row_blocks(plane):
        scaled = np.subtract(plane[block], offset, dtype=np.float32)
        scaled *= scale
        np.clip(scaled, 0, COLOURS - 1, out=scaled)
        if np.isnan(scaled).any():
            return None
        indices[block] = scaled  # truncates toward zero, like pyqtgraph's cast
    return indices
