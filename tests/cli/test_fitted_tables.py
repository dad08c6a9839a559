"""In the terminal: at 150 columns ``compare`` cut numbers ("25,3…", "0.00…") and
dropped the flips column to nothing once a long imported label was present, and ``ls`` cut
model and image names even at 250 columns. Every table the command line prints now keeps its
figures whole at any width, and wraps or shortens names in the middle (cli/tables.py)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len

from segdiff_gui.cli.tables import NAME_LINES, FittedTable, middle_shortened, name_cell
from segdiff_gui.cli.text import TerminalConsole
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.storage import ResultCache
from tests.conftest import run_keys, segdiff, segdiff_here

MODEL = "segmentation_unet_resnet50_trained_on_cells_2024_03_final_v2_for_production.keras"
IMAGE = "microscopy_slide_0042_region_07_channel_dapi_stitched_and_flatfield_corrected.png"
LABEL = "TensorRT 10.3 FP16 engine on Jetson Orin AGX built 2024-06-01, strict types, run 7"
WIDTHS = (80, 120, 150, 250)
CLI = Path(__file__).parents[2] / "segdiff_gui" / "cli"


@pytest.fixture(scope="module")
def long_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of a model and an image with long file names, run by the fake engine at batch 1
    and 2, in bfloat16 and in float64 (the exact run), and the bfloat16 map imported again
    under a long label of the user's own."""
    folder = tmp_path_factory.mktemp("long-names")
    model, image, cache = folder / MODEL, folder / IMAGE, folder / "cache"
    shutil.copy(demo_model(), model)
    shutil.copy(demo_images()[0], image)
    ran = segdiff(
        "run", model, image, "--cache", cache, "--repeats", "1", "--config", "batch=1",
        "--config", "batch=2", "--config", "precision=mixed_bfloat16",
        "--config", "precision=float64", fake=True,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    store = ResultCache(cache)
    bf16 = store.read_run(run_keys(store)["cpu b1 bf16 r0"])
    np.save(folder / "mine.npy", bf16.probabilities)
    imported = segdiff("import", folder / "mine.npy", "--model", model, "--image", image,
                       "--label", LABEL, "--cache", cache, fake=True)  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    return cache


def whole(figure: str, text: str) -> bool:
    """Whether ``figure`` appears in ``text`` as a whole, not as part of a longer figure nor
    cut short (``65,4…``)."""
    return re.search(rf"(?<![\w.,]){re.escape(figure)}(?![\w.,%…])", text) is not None


def rendered(table: FittedTable, width: int) -> str:
    written = io.StringIO()
    TerminalConsole(file=written, width=width).print(table)
    return written.getvalue()


def at_width(capsys, monkeypatch, width: int, *args: object) -> str:
    """What ``segdiff ARGS`` prints at ``width`` columns: its tables (and their titles) fit;
    sentences are never wrapped, a line each."""
    monkeypatch.setenv("COLUMNS", str(width))
    result = segdiff_here(capsys, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def fits(text: str, width: int) -> bool:
    return max(cell_len(line) for line in text.splitlines()) <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_keeps_every_figure_whole_beside_a_long_imported_label(
    long_names, capsys, monkeypatch, width
):
    text = at_width(capsys, monkeypatch, width, "compare", "--cache", long_names)
    (group,) = json.loads(segdiff_here(capsys, "compare", "--cache", long_names, "--json").stdout)
    rows = group["comparisons"]
    assert any(row["label"].startswith(f"imported: {LABEL[:20]}") for row in rows)
    # The table, between the group's line and the sentences.
    table = "\n".join(text[: text.index("NOT bitwise equal")].splitlines()[1:-1])
    assert fits(table, width)
    figures = [
        figure
        for row in rows
        for figure in (
            row["id"],
            f"{row['differing_pixels']:,}",
            f"{row['pixels']:,}",
            f"{row['max_ulp']:,}",
            f"{row['max_abs']:.3g}",
            f"{row['mean_abs']:.3g}",
            f"{row['flips']:,}",
        )
    ]
    figures += [f"{error['max_ulp']:,}" for error in group["exact"]["errors"][1:]]
    assert [f for f in figures if not whole(f, table)] == []
    # Every column is there: the flips column is not squeezed to nothing.
    assert "flips" in table and "vs exact" in table


@pytest.mark.parametrize("width", WIDTHS)
def test_ls_keeps_ids_and_groups_whole_and_the_start_and_end_of_long_names(
    long_names, capsys, monkeypatch, width
):
    text = at_width(capsys, monkeypatch, width, "ls", "--cache", long_names)
    assert fits(text, width)
    runs = json.loads(segdiff_here(capsys, "ls", "--cache", long_names, "--json").stdout)
    assert len(runs) == 5
    for run in runs:
        assert whole(run["id"], text) and whole(run["group"], text)
        assert whole("×".join(map(str, run["shape"])), text)
    # A file's extension and a name's start stay, however narrow the column.
    for name in (MODEL, IMAGE):
        assert name[:10] in text and name[name.rindex(".") :] in text
    if width >= 250:  # room enough: nothing shortened
        assert "…" not in text


def test_a_name_longer_than_its_lines_keeps_its_start_and_its_end():
    console = TerminalConsole(width=200)
    cell = name_cell(console, f"imported: {LABEL} r0", 16)
    lines = cell.split("\n")
    assert len(lines) == NAME_LINES and all(cell_len(line) <= 16 for line in lines)
    joined = "".join(lines)
    assert joined.startswith("imported: Tens") and joined.endswith("run 7 r0") and "…" in joined
    assert name_cell(console, "cpu b1 bf16 r0", 16) == "cpu b1 bf16 r0"  # fits: untouched
    assert middle_shortened(MODEL, 21) == "segmentati…tion.keras"
    assert middle_shortened("short.png", 21) == "short.png"


def test_a_table_too_narrow_for_its_figures_shows_each_row_as_a_record():
    table = FittedTable(title="t")
    table.name("run")
    for header in ("differing pixels", "max ULP", "max |Δ|"):
        table.figure(header)
    table.add_row("cpu b64 r0", "25,344 / 65,536", "1,928,416", "0.0117")
    for width in (30, 40, 60):
        text = rendered(table, width)
        assert all(cell_len(line) <= width for line in text.splitlines())
        for figure in ("25,344", "65,536", "1,928,416", "0.0117"):
            assert whole(figure, text), (width, text)
    assert "│ cpu b64 r0 │" in rendered(table, 100)  # wide enough: one row of a table


def test_every_table_the_command_line_prints_is_laid_out_by_the_one_rule():
    """rich's Table is built in cli/tables.py only: a table elsewhere would cut as rich does."""
    others = [
        path.name
        for path in CLI.glob("*.py")
        if path.name != "tables.py" and re.search(r"rich\.table|\bTable\(", path.read_text())
    ]
    assert others == []


def test_a_column_kept_for_last_stays_whole_while_others_can_wrap():
    """``ls``'s host says where a merged run came from: whole, while the runtime wraps; and
    a name a column or two short of whole is not folded by a character."""
    table = FittedTable()
    for header in ("id", "label", "model", "runtime"):
        (table.text if header == "runtime" else table.name)(header)
    table.name("host", last=True)
    table.figure("when", justify="left")
    host = "vm (merged from from-server.h5)"
    table.add_row("f0779182", "cpu b4 r1", "unet_sigmoid.keras", "TF 2.21.0, oneDNN on, XLA",
                  host, "2026-12-06 13:11:07")  # fmt: skip
    for width in (100, 120):
        text = rendered(table, width)
        assert fits(text, width) and "unet_sigmoid.keras" in text, text
        assert "2026-12-06 13:11:07" in text  # a figure: whole
    text = rendered(table, 120)
    assert host in text and "TF 2.21.0, oneDNN on, XLA" not in text  # the runtime wrapped
    assert host not in rendered(table, 100)  # no room left: it gives up width too
