"""Tables for notebooks: a pandas DataFrame when pandas is installed (the ``notebook`` extra),
else the same rows as a list of dicts. pandas is imported only when a table is made, so the
API works, and imports fast, without it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from segdiff_gui.api.arguments import checked_cutoff
from segdiff_gui.core.errors import InputError

if TYPE_CHECKING:
    from segdiff_gui.core.study import GroupAnalysis, StudyRun

__all__ = ["Table", "flip_curve_table", "make_table", "pixel_rows"]

# A pandas.DataFrame where pandas is installed, else a list of records (dicts).
Table = Any


def make_table(
    rows: Sequence[dict[str, Any]],
    index: str | None = None,
    columns: Sequence[str] | None = None,
) -> Table:
    """``rows`` as a DataFrame indexed by ``index`` (a column), or as the list itself;
    ``columns`` names them where there may be no rows (an empty table keeps its header)."""
    try:
        import pandas
    except ImportError:
        return [dict(row) for row in rows]
    frame = pandas.DataFrame.from_records(list(rows), columns=columns)
    if index is not None and index in frame.columns:
        frame = frame.set_index(index)
    return frame


def pixel_rows(
    header: Sequence[str], lines: Sequence[Sequence[object]], labels: Sequence[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``io.tables.pixel_table``'s lines (a pixel each, four cells per run) as tidy rows, a
    row per pixel and run: value as float32 (the cells are its shortest round-trip text,
    so this is exact) beside that text, bits, ULPs and class; and the columns' names."""
    import numpy as np

    lead = len(header) - 4 * len(labels)  # row, column, why[, reference class]
    rows = []
    for line in lines:
        where = dict(zip(header[:lead], line[:lead], strict=True))
        for index, label in enumerate(labels):
            value, bits, ulp, klass = line[lead + 4 * index : lead + 4 * index + 4]
            rows.append(
                {
                    **where,
                    "run": label,
                    "value": np.float32(str(value)),
                    "exact": value,
                    "bits": bits,
                    "ulp": int(str(ulp)),
                    "class": int(str(klass)),
                }
            )
    return rows, [*header[:lead], "run", "value", "exact", "bits", "ulp", "class"]


def flip_curve_table(
    study: GroupAnalysis, runs: Sequence[StudyRun], cutoffs: Sequence[float] | None, title: str
) -> Table:
    """Flip counts of ``runs`` (binary maps) at ``cutoffs`` (default: their curves' own
    points), indexed by cutoff; ``title`` names the study in an error."""
    import numpy as np

    if cutoffs is not None and not isinstance(cutoffs, Sequence | np.ndarray):
        raise InputError("cutoffs", f"is {cutoffs!r}: give a list of cutoffs")
    grid = None if cutoffs is None else np.array([checked_cutoff(c) for c in cutoffs])
    curves = {run.label: study.curve(run) for run in runs}
    if not curves:
        raise InputError(title, "has only the reference: no curve to draw")
    points = next(iter(curves.values())).cutoffs if grid is None else grid
    rows = [
        {"cutoff": float(t), **{label: int(c.at(t)) for label, c in curves.items()}} for t in points
    ]
    return make_table(rows, index="cutoff")
