"""``examples/seed_case.ipynb`` executed in a fresh kernel, as a user would run it: no cell
fails, and what it prints are the figures ``segdiff`` gives for the same cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from segdiff_gui import api
from segdiff_gui.storage.cache import ResultCache
from tests.conftest import segdiff
from tests.fake_engine import FAKE_VERSION

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
NOTEBOOK = ROOT / "examples" / "seed_case.ipynb"
FAKE_ENGINE = ROOT / "tests" / "fake_engine.py"


def test_the_notebook_is_stored_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)


def _kernel(tmp_path: Path, *, fake: bool = False) -> str:
    """A kernel of this interpreter (a machine's own ``python3`` kernel may be another); with
    ``fake``, its engine children are the fake engine's (tests/fake_engine.py)."""
    spec = tmp_path / "jupyter" / "kernels" / "segdiff-test"
    spec.mkdir(parents=True)
    launcher = [str(FAKE_ENGINE), "kernel"] if fake else ["-m", "ipykernel_launcher"]
    argv = [sys.executable, *launcher, "-f", "{connection_file}"]
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
    """The notebook is the point here, not the model's arithmetic: its runs are the fake
    engine's (the API's real children: tests/api/test_api.py)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEGDIFF_CACHE", str(cache))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=_kernel(tmp_path, fake=True),
        timeout=300,
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
    # The notebook's study compares its own runs; the sweep after it added a run of cell_00
    # at batch 64 in another batch (the test set's 16 images, not the target cycled), which
    # the cache's comparison names with its batch (tests/runner/test_sweep_batches.py).
    stored = {r.key: r for r in ResultCache(cache).records()}
    compared = [row for row in group["comparisons"] if stored[row["key"]].batch_position is None]
    assert len(compared) == 4 - 1  # the study's four runs, less its reference
    for row in compared:
        label = stored[row["key"]].label  # as the study names it: one batch per configuration
        line = next(line for line in shown.splitlines() if line.startswith(label + " "))
        figures = line.split()[len(label.split()) :]
        expected = [str(row[name]) for name in ("bitwise_equal", "differing_pixels", "max_ulp")]
        assert figures[:3] == expected
        assert figures[-1] == str(row["flips"])  # at the study's cutoff, 0.5

    # The seed's pixel, as the cache has it: the printed values are the stored float32s.
    study = api.open_cache(cache).study(image="cell_00.png")
    assert {run.provenance.version for run in study.runs} == {FAKE_VERSION}
    worst_row = max(compared, key=lambda row: row["max_abs"])
    worst = stored[worst_row["key"]].label
    reference, other = study.map("cpu b1 r0"), study.map(worst_row["key"])
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
    assert "Keep batch 1, as in the reference" in diagnosis  # how to avoid it
    assert "batch 1 → 64" in _text(cells["explain"])
    assert "16 images" in _text(cells["sweep"])
    assert (tmp_path / "seed_case_report.html").stat().st_size > 10_000


def test_the_notebook_extra_executes_the_notebook_as_the_docs_say():
    """README never said that executing a notebook needs a kernel and
    nbconvert; the ``notebook`` extra now brings both, and the Python API page's command
    (docs/python.md) uses them."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    notebook = {
        requirement.split(">")[0].split("<")[0].split("=")[0]
        for requirement in extras["optional-dependencies"]["notebook"]
    }
    assert {"ipykernel", "nbconvert"} <= notebook
    page = " ".join((ROOT / "docs" / "python.md").read_text().split())
    assert "jupyter nbconvert --to notebook --execute examples/seed_case.ipynb" in page


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="no git")
def test_what_executing_the_notebook_writes_is_ignored_by_git():
    """Executing the notebook left ``seed_case_report.html`` untracked."""
    written = ["examples/seed_case_report.html", "examples/seed_case.run.ipynb"]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *written],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ignored.stdout.split() == written


_BAR = """
from segdiff_gui.api.progress import ProgressBar
from segdiff_gui.core.protocol import PlanReady, RunFinished, RunStarted

bar = ProgressBar()
bar(PlanReady(total=3, cached=1, children=1))
for key in ("a", "b"):
    bar(RunStarted(key=key, label=f"cpu {key}"))
    bar(RunFinished(key=key, label=f"cpu {key}", seconds=0.1, device="cpu:0"))
bar.close()
"""


def test_a_saved_notebook_shows_the_progress_bar_finished(tmp_path, monkeypatch):
    """An executed notebook stored the bar as "0%", the text the widget
    had when first shown (what a reader without the live widget sees)."""
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # pytest-qt's QT_API (set once a window test has run in this worker) keeps ipywidgets
    # from loading in the kernel: tqdm then draws its text bar, as in a plain terminal.
    monkeypatch.delenv("QT_API", raising=False)
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(_BAR))
    NotebookClient(notebook, kernel_name=_kernel(tmp_path), timeout=120).execute()
    outputs = notebook.cells[0].outputs
    shown = next((o for o in outputs if o.output_type == "display_data"), None)
    assert shown is not None, outputs
    assert "application/vnd.jupyter.widget-view+json" in shown.data  # the notebook's widget
    assert shown.data["text/plain"].startswith("runs: 100%")
    assert "3/3" in shown.data["text/plain"]  # every run listed: the cached one done
