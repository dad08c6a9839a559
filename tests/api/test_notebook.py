"""``examples/seed_case.ipynb`` executed in a fresh kernel, as a user would run it: no cell
fails, and what it prints are the figures ``segdiff`` gives for the same cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from segdiff_gui import api
from tests.conftest import segdiff

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).parents[2] / "examples" / "seed_case.ipynb"


def test_the_notebook_is_stored_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)


def _kernel(tmp_path: Path) -> str:
    """A kernel of this interpreter (a machine's own ``python3`` kernel may be another)."""
    spec = tmp_path / "jupyter" / "kernels" / "segdiff-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "segdiff test", "language": "python"})
    )
    return "segdiff-test"


def _text(cell: nbformat.NotebookNode) -> str:
    """What a cell shows as text: its printed lines and its value's plain form."""
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif "data" in output:
            parts.append(output.data.get("text/plain", ""))
    return "\n".join(parts)


def test_the_seed_notebook_runs_and_prints_segdiff_s_figures(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEGDIFF_CACHE", str(cache))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=_kernel(tmp_path),
        timeout=600,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on any failing cell
    cells = {tag: cell for cell in notebook.cells for tag in cell.metadata.get("tags", [])}
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if "ename" in o]
    assert errors == []

    result = segdiff("compare", "--json", "--cache", cache, "--image", "cell_00.png")
    assert result.returncode == 0, result.stderr
    (group,) = json.loads(result.stdout)
    shown = _text(cells["compare"])
    for row in group["comparisons"]:
        line = next(line for line in shown.splitlines() if line.startswith(row["label"] + " "))
        figures = line.split()[len(row["label"].split()) :]
        expected = [str(row[name]) for name in ("bitwise_equal", "differing_pixels", "max_ulp")]
        assert figures[:3] == expected
        assert figures[-1] == str(row["flips"])  # at the study's cutoff, 0.5

    # The seed's pixel, as the cache has it: the printed values are the stored float32s.
    study = api.open_cache(cache).study(image="cell_00.png")
    worst = max(group["comparisons"], key=lambda row: row["max_abs"])["label"]
    reference, other = study.map("cpu b1 r0"), study.map(worst)
    row, col = np.unravel_index(np.abs(reference - other).argmax(), reference.shape)
    said = _text(cells["pixel"]).splitlines()
    assert said[0] == (
        f"pixel ({row}, {col}): cpu b1 r0 says {np.format_float_positional(reference[row, col])}, "
        f"{worst} says {np.format_float_positional(other[row, col])}"
    )
    flipped = int(said[1].split(": ")[1].split()[0])
    assert flipped >= 1  # a cutoff between the two values flips that pixel, at least
    diagnosis = _text(cells["diagnose"])
    assert diagnosis.splitlines()[1] == "Is it repeatable?"
    assert "bitwise-equal maps over its 2 repeats" in diagnosis
    assert "Keep the batch" in diagnosis  # how to avoid it
    assert "batch 1 → 64" in _text(cells["explain"])
    assert "16 images" in _text(cells["sweep"])
    assert (tmp_path / "seed_case_report.html").stat().st_size > 10_000
