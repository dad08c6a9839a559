"""The API's exact answer: every run against the exact (float64) run as tables, text and
HTML, beside the reference (a study built in memory until a cache holds a float64 run,
helper E's part); and a study without one says how to make it."""

from __future__ import annotations

import csv

import numpy as np
import pandas
import pytest

from segdiff_gui import api
from segdiff_gui.api.results import Comparison, Exact
from segdiff_gui.core.errors import InputError
from segdiff_gui.runner.reports import ReportContext
from tests.exact_runs import assert_exact_pixels, bf16_study
from tests.factories import two_configurations_cache

CONTEXT = ReportContext("m.keras", "cell.png", "g", {}, {})


def test_exact_gives_a_per_run_error_table_and_which_side_of_each_flip_is_right():
    study = bf16_study()
    summary = study.exact_summary()
    assert summary is not None
    exact = Exact(summary, study.exact.probabilities, "m.keras on cell.png")
    table = exact.table
    assert isinstance(table, pandas.DataFrame) and list(table.index) == ["cpu r0", "bf16 r0"]
    assert table.loc["bf16 r0", "decided_wrong"] == 3 and table.loc["cpu r0", "wrong"] == 1
    assert table.loc["cpu r0", "max_ulp"] == 0 and table.loc["cpu r0", "within_one_ulp_share"] == 1
    flips = exact.flips_table
    assert list(flips.index) == ["bf16 r0"]
    assert flips.loc["bf16 r0", ["first", "first_right", "second_right"]].tolist() == [
        "cpu r0",
        3,
        0,
    ]
    text = repr(exact)
    assert text.startswith("<Exact m.keras on cell.png against fp64 r0, at cutoff 0.5>")
    assert "disagree on 3 pixels; the exact class agrees with cpu r0 at 3" in text
    html = exact._repr_html_()
    assert "fp64 r0" in html and "≤1 ULP 100.00%" not in html and "≤1 ULP 100%" in html
    assert exact.to_dict() == summary.to_dict()


def test_the_comparison_names_the_exact_run_beside_the_reference():
    comparison = Comparison(bf16_study(), CONTEXT, "m.keras on cell.png", None)
    assert comparison.reference == "cpu r0" and comparison.exact is not None
    assert [row["label"] for row in comparison.rows] == ["bf16 r0"]
    lines = repr(comparison).splitlines()
    assert (
        "  vs exact fp64 r0: bf16 r0: ≤1 ULP 0.00%, max 100,664 ULP, 4 wrong (1 undecidable)"
        in (lines)
    )


def test_a_study_without_an_exact_run_says_how_to_make_one(tmp_path):
    study = api.open_cache(two_configurations_cache(tmp_path, "sigmoid").root).study()
    assert study.compare().exact is None
    with pytest.raises(InputError, match="has no exact run: run the model with precision=float64"):
        study.exact()


def test_a_cached_exact_run_is_the_study_s_exact_beside_its_reference(exact_cache):
    study = api.open_cache(exact_cache).study()
    assert study.reference.label == "cpu b1 r0"
    assert [run.label for run in study.runs] == ["cpu b1 r0", "cpu b1 bf16 r0"]
    exact = study.exact()
    assert exact.run == "cpu b1 fp64 r0" and exact.map.dtype == np.float64
    assert list(exact.table.index) == ["cpu b1 r0", "cpu b1 bf16 r0"]
    assert (
        exact.table.loc["cpu b1 r0", "max_ulp"] <= 4 < exact.table.loc["cpu b1 bf16 r0", "max_ulp"]
    )
    assert study.compare().exact.run == "cpu b1 fp64 r0"
    # Another reference: the exact run stays beside it, and is never one.
    other = study.with_reference("cpu b1 bf16 r0").exact()
    assert [e.label for e in other.errors] == ["cpu b1 bf16 r0", "cpu b1 r0"]
    assert other.flips[0].first == "cpu b1 bf16 r0"


def test_the_flipped_pixels_give_the_exact_value_and_class_beside_each_pixel(exact_cache, tmp_path):
    """``pixels`` and ``export_pixels`` (the CSV ``segdiff export`` writes) carry
    the exact run's value, class and decidability at each pixel."""
    study = api.open_cache(exact_cache).study()
    exact = study.exact().map
    table = study.pixels("cpu b1 bf16 r0", at_risk=True)
    assert table["exact value (float64)"].dtype == np.float64
    for row in table.to_dict("records"):
        value = exact[row["row"], row["column"]]
        assert row["exact value (float64)"] == value and row["exact class"] == int(value >= 0.5)
    written = study.export_pixels(tmp_path / "f.csv", "cpu b1 bf16 r0", at_risk=True)
    assert_exact_pixels(list(csv.DictReader(written.open())), exact, 0.5)
