"""What the views draw: float planes as colour-table indices, masks pooled to the screen, and
where the flips are ringed.

Float planes turned into colour-table indices before pyqtgraph sees them.

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
from segdiff_gui.core.pages import empty_in_ordinary_pages

__all__ = ["COLOURS", "MARKS_AT_MOST", "flip_marks", "level_indices", "pooled_any"]

COLOURS = 256
# A view rings its flips while they fall in at most this many screen blocks: enough for every
# flip of a run that has few (the ones that are hard to see); more rings would cover the map,
# and flips that many show as the overlay's patches.
MARKS_AT_MOST = 300


def level_indices(
    plane: np.ndarray, levels: tuple[float, float], grows: bool = False
) -> np.ndarray | None:
    """``plane`` as uint8 indices into a :data:`COLOURS`-entry table spanning ``levels``, or
    None when it holds NaN (pyqtgraph then draws those pixels transparent from the floats).
    ``grows``: the views are new (runs joined), not redrawn in place of others; a large
    result then comes in ordinary pages (core/pages.py)."""
    low, high = levels
    span = (high - low) or 1.0
    # Python floats keep the arithmetic in float32, as pyqtgraph's own rescaling does.
    offset, scale = float(low), float(COLOURS / span)
    indices = (empty_in_ordinary_pages if grows else np.empty)(plane.shape, np.uint8)
    for block in row_blocks(plane):
        scaled = np.subtract(plane[block], offset, dtype=np.float32)
        scaled *= scale
        np.clip(scaled, 0, COLOURS - 1, out=scaled)
        if np.isnan(scaled).any():
            return None
        indices[block] = scaled  # truncates toward zero, like pyqtgraph's cast
    return indices


def pooled_any(mask: np.ndarray, factor: int) -> np.ndarray:
    """Whether any pixel of each ``factor``×``factor`` block of ``mask`` is set (``factor`` a
    power of two; edge blocks are padded with False).

    A view that shows an 8192×8192 map in a few hundred screen pixels samples one image pixel in
    many, so isolated flipped pixels would vanish exactly when one looks for them; drawn pooled,
    each still colours its screen pixel.
    """
    if factor == 1:
        return mask
    rows, columns = -(-mask.shape[0] // factor), -(-mask.shape[1] // factor)
    if mask.shape != (rows * factor, columns * factor):
        padded = np.zeros((rows * factor, columns * factor), dtype=bool)
        padded[: mask.shape[0], : mask.shape[1]] = mask
        mask = padded
    if factor == 2:  # a reduction over pairs is slow in numpy; two strided ORs are not
        pairs = mask[0::2] | mask[1::2]
        pooled_pairs: np.ndarray = np.logical_or(pairs[:, 0::2], pairs[:, 1::2])
        return pooled_pairs
    if factor >= 8:
        # Eight booleans are one 64-bit word: OR whole words down each block's rows, then test
        # each block's words (numpy's reductions along an axis of 8 are slow; the
        # cutoff and zoom of a 2048² map pool at 8, an 8192² map's at 32).
        words = np.ascontiguousarray(mask).view(np.uint64)
        down = np.bitwise_or.reduce(words.reshape(rows, factor, columns * factor // 8), axis=1)
        if factor == 8:
            set_words: np.ndarray = np.not_equal(down, 0)
            return set_words
        pooled_words: np.ndarray = down.reshape(rows, columns, factor // 8).any(axis=2)
        return pooled_words
    # Rows of blocks first (each reduction runs along whole contiguous rows), then columns.
    block_rows = mask.reshape(rows, factor, columns * factor).any(axis=1)
    pooled = np.asarray(block_rows.reshape(rows, columns, factor).any(axis=2))
    return pooled


def flip_marks(
    pooled: np.ndarray,
    factor: int,
    shape: tuple[int, ...],
    count: int | None = None,
    at_most: int = MARKS_AT_MOST,
) -> tuple[np.ndarray, np.ndarray]:
    """Where to ring the flips of a map of ``shape``, given its flip mask pooled by ``factor``
    (:func:`pooled_any`; ``count`` of its set blocks if known, as a flip count is): the centre
    of each set block in map units (x, y: a pixel's centre when ``factor`` is 1), or none when
    more than ``at_most`` are set. The blocks are the screen's, so this costs a pass over the
    pooled mask, not over the map."""
    none = np.empty(0), np.empty(0)
    if count is None:
        count = int(np.count_nonzero(pooled))
    if count == 0 or count > at_most:
        return none
    rows, columns = np.divmod(np.flatnonzero(pooled), pooled.shape[1])
    height, width = shape[:2]
    # An edge block stops at the map's edge: its centre is the middle of what it covers.
    x = columns * factor + np.minimum(factor, width - columns * factor) / 2
    y = rows * factor + np.minimum(factor, height - rows * factor) / 2
    return x.astype(float), y.astype(float)
