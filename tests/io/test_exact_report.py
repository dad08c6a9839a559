"""The report and a notebook's study show every run against the exact (float64) run, and
which side of each flip is right, beside the reference (a study built in memory until a
cache holds a float64 run, helper E's part)."""

from __future__ import annotations

import json

import numpy as np

from segdiff_gui.io.html_report import study_fragment, write_html_report
from segdiff_gui.io.reports import report_data, write_json_report
from tests.exact_runs import bf16_study
from tests.factories import seed_study

FLIP_SENTENCE = (
    "At cutoff 0.5 cpu r0 and bf16 r0 disagree on 3 pixels; the exact class agrees with cpu r0 "
    "at 3 and with bf16 r0 at 0; 0 lie within 1 float32 ULP (5.96e-08) of the cutoff."
)


def test_the_report_says_which_answer_is_right(tmp_path):
    study = bf16_study()
    data = report_data(study, {}, {"model": "m.keras", "image": "cell.png"})
    loaded = json.loads(write_json_report(tmp_path / "r.json", data).read_text())
    assert loaded["reference"]["label"] == "cpu r0"
    assert [row["label"] for row in loaded["comparisons"]] == ["bf16 r0"]
    assert [run["label"] for run in loaded["runs"]] == ["cpu r0", "bf16 r0", "fp64 r0"]
    assert loaded["exact"]["run"] == "fp64 r0"
    assert [e["decided_wrong"] for e in loaded["exact"]["errors"]] == [0, 3]
    text = write_html_report(tmp_path / "r.html", data, study, np.zeros((20, 20), np.uint8))
    html = text.read_text()
    assert "<h2>Which answer is right?</h2>" in html
    assert "Against the exact run <b>fp64 r0</b>" in html
    assert (
        "<tr><td>bf16 r0</td><td>0.003</td><td>0.003</td><td>100,664</td><td>0 / 400</td>" in html
    )
    assert FLIP_SENTENCE in html
    fragment = study_fragment(study, None, "m.keras on cell.png")
    assert "Against the exact run <b>fp64 r0</b>" in fragment and FLIP_SENTENCE in fragment


def test_a_report_without_an_exact_run_has_no_such_section(tmp_path):
    study = seed_study()
    data = report_data(study, {}, {"model": "m.keras", "image": "cell.png"})
    assert "exact" not in data
    html = write_html_report(tmp_path / "r.html", data, study, None).read_text()
    assert "Which answer is right?" not in html and "exact run" not in html
