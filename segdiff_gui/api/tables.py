"""Tables for notebooks: a pandas DataFrame when pandas is installed (the ``notebook`` extra),
else the same rows as a list of dicts. pandas is imported only when a table is made, so the
API works, and imports fast, without it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Table", "make_table"]

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
