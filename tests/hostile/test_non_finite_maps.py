"""Stored maps that are not finite (held cases of the review, kept here). A run's map
may hold NaN or ±infinity: a model that overflows in float16 gives NaN everywhere, and a
bundle may carry whatever its maker stored. Such runs are stored and compared as they are
(an imported map or an API array is refused instead: ``test_user_files``,
``tests/cli/test_your_pipeline``): every command shows them, no command fails on them, and
what is written for machines is JSON as RFC 8259 has it, which has no NaN or Infinity."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui import api
from segdiff_gui.storage import ResultCache, write_bundle
from tests.conftest import segdiff_here
from tests.factories import IMAGE_HASH, make_record

pytestmark = pytest.mark.timeout(120, method="thread")


def _strict(text: str) -> object:
    """``text`` parsed as JSON that any parser reads: Python's own takes NaN and Infinity."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _bundle_of_non_finite_runs(tmp_path: Path) -> Path:
    """A reference and its repeat, a run all NaN, and one with ±∞, NaN and values outside
    [0, 1] in its first row: as a bundle made elsewhere carries them."""
    source = ResultCache(tmp_path / "elsewhere")
    values = np.linspace(0.3, 0.7, 32 * 32, dtype=np.float32).reshape(32, 32)
    odd = values.copy()
    odd[0, :5] = [np.inf, -np.inf, np.nan, 2.0, -1.0]
    records = [
        make_record("m", values, "cpu b1 r0"),
        make_record("m", values, "cpu b1 r1"),
        make_record("m", np.full((32, 32), np.nan, np.float32), "cpu b4 r0"),
        make_record("m", odd, "cpu b8 r0"),
    ]
    for record in records:
        source.write_run(record)
    source.write_image(IMAGE_HASH, "t.png", (values * 255).astype(np.uint8))
    bundle = tmp_path / "odd.h5"
    write_bundle(source, [record.key for record in records], bundle)
    return bundle


@pytest.fixture
def merged(tmp_path, capsys) -> Path:
    """A cache the bundle of such runs was merged into."""
    cache = tmp_path / "cache"
    result = segdiff_here(capsys, "merge", _bundle_of_non_finite_runs(tmp_path), "--cache", cache)
    assert result.returncode == 0, result.stderr
    assert len(ResultCache(cache).keys()) == 4
    return cache


def test_runs_of_nan_and_infinity_are_shown_by_every_command(merged, tmp_path, capsys):
    at = ("--cache", merged)
    report = (tmp_path / "report.html", tmp_path / "report.json")
    pair = ("--ref", "cpu b1 r0", "--other", "cpu b8 r0")
    said = {
        "ls": segdiff_here(capsys, "ls", *at),
        "compare": segdiff_here(capsys, "compare", *at),
        "check": segdiff_here(capsys, "check", *at),
        "diagnose": segdiff_here(capsys, "diagnose", *at),
        "sweep": segdiff_here(capsys, "sweep", *at),
        "explain": segdiff_here(
            capsys, "explain", *at, "--from", "cpu b1 r0", "--to", "cpu b8 r0"
        ),  # fmt: skip
        "export": segdiff_here(capsys, "export", *at, *pair, "--csv", tmp_path / "pixels.csv"),
        "report": segdiff_here(capsys, "report", *at, "--html", report[0], "--json", report[1]),
        "bundle": segdiff_here(capsys, "bundle", tmp_path / "again.h5", *at),
    }
    for command, result in said.items():
        # check fails the runs that differ (exit 1); nothing is an error of segdiff's.
        assert result.returncode in (0, 1), (command, result.stderr)
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert said["check"].returncode == 1
    assert "nan mismatches 1,024 > 0" in said["check"].stdout
    assert "max |Δ| inf" in said["compare"].stdout
    assert "1,024 values NaN in one map only" in said["compare"].stdout
    assert report[0].stat().st_size and (tmp_path / "pixels.csv").stat().st_size


def test_what_is_written_for_machines_is_json_without_nan_or_infinity(merged, tmp_path, capsys):
    """Python wrote a largest difference of ∞ as the bare word ``Infinity``, which
    JavaScript's ``JSON.parse``, jq and every strict parser refuse. What is not a number is
    now a string (``"Infinity"``, ``"NaN"``), which ``float()`` reads back."""
    at = ("--cache", merged)
    documents = {}
    for command in ("ls", "compare", "check", "diagnose", "sweep"):
        result = segdiff_here(capsys, command, *at, "--json")
        assert result.returncode in (0, 1), (command, result.stderr)
        documents[command] = _strict(result.stdout)
    written = segdiff_here(capsys, "report", *at, "--json", tmp_path / "report.json")
    assert written.returncode == 0, written.stderr
    documents["report"] = _strict((tmp_path / "report.json").read_text())
    rows = [row for group in documents["compare"] for row in group["comparisons"]]  # type: ignore[attr-defined]
    odd = next(row for row in rows if row["label"] == "cpu b8 r0")
    assert odd["max_abs"] == "Infinity" and math.isinf(float(odd["max_abs"]))
    nan = next(row for row in rows if row["label"] == "cpu b4 r0")
    assert nan["nan_mismatches"] == 32 * 32 and nan["max_abs"] == 0


def test_the_report_and_a_notebook_say_which_values_are_nan(merged, tmp_path, capsys):
    """The report's table (and a notebook's, the same fragment) said an all-NaN run
    "differs 1,024 / 1,024, max ULP 0, max |Δ| 0" and nothing of NaN, where the terminal's
    table has a column for values NaN in one map only."""
    page = tmp_path / "report.html"
    written = segdiff_here(capsys, "report", "--cache", merged, "--html", page)
    assert written.returncode == 0, written.stderr
    study = api.open_cache(merged).study()
    compared = study.compare()
    for html in (page.read_text(), compared._repr_html_()):
        assert "<th>NaN in one only</th>" in html
        assert re.search(r"<tr><td>cpu b4 r0</td><td>differs</td>[^/]*/[^/]*</td>.*?"
                         r"<td>1,024</td></tr>", html)  # fmt: skip
    assert "1,024 values NaN in one map only" in repr(compared)


def test_the_api_studies_runs_of_nan_and_infinity(tmp_path):
    bundle = _bundle_of_non_finite_runs(tmp_path)
    runs = api.open_bundle(bundle)
    study = runs.study()
    compared = study.compare()
    texts = [repr(runs), repr(study), repr(compared), repr(study.diagnose())]
    pages = [runs._repr_html_(), study._repr_html_(), compared._repr_html_()]
    assert all(texts) and all(pages)
    assert any("inf" in text for text in texts)
