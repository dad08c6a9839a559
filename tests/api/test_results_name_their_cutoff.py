"""Every result of the API names the cutoff it was computed at, in its text and its HTML:
an explanation said "at risk 166" at 0.5 inside a notebook about 0.55,
and nothing in it said 0.5. A cutoff is named as the float32 the flips were counted at;
a multi-class study's results say argmax instead."""

from __future__ import annotations

import numpy as np
import pytest

from segdiff_gui import api
from tests.factories import two_configurations_cache

TYPED = 0.5500041246414185
COUNTED = "at cutoff 0.5500041"


def _results(study: api.Study) -> dict[str, object]:
    return {
        "study": study,
        "comparison": study.compare(),
        "diagnosis": study.diagnose(),
        "explanation": study.explain(),
        "sweep": study.sweep(),
    }


def test_every_result_names_the_cutoff_it_was_computed_at(tmp_path):
    study = api.open_cache(two_configurations_cache(tmp_path, "sigmoid").root, cutoff=TYPED).study()
    assert study.cutoff == 0.5500041  # the float32 the flips are counted at
    for name, result in _results(study).items():
        text, html = repr(result), result._repr_html_()  # type: ignore[attr-defined]
        assert "0.5500041" in text.splitlines()[0], (name, text.splitlines()[0])
        assert "0.5500041" in html, name
    # A result asked at another cutoff names that one, never the study's.
    for result in (
        study.compare(0.25),
        study.diagnose(0.25),
        study.explain(cutoff=0.25),
        study.sweep(cutoff=0.25),
    ):
        text, html = repr(result), result._repr_html_()
        assert "at cutoff 0.25" in text.splitlines()[0] and "cutoff 0.25" in html
        assert "0.5500041" not in text and "0.5500041" not in html
    explanation = study.explain()
    assert repr(explanation).splitlines()[0].endswith(f", {COUNTED}>")


def test_a_multiclass_study_s_results_say_argmax(tmp_path):
    study = api.open_cache(two_configurations_cache(tmp_path, "softmax").root, cutoff=TYPED).study()
    for name, result in _results(study).items():
        if name == "study":
            continue  # its own line gives the study's default cutoff
        text, html = repr(result), result._repr_html_()  # type: ignore[attr-defined]
        assert "argmax" in text.splitlines()[0] and "argmax" in html, name
        assert "0.5500041" not in text.splitlines()[0], name


@pytest.mark.parametrize("cutoff", ["0.55", 0.5, np.float32(0.55)])
def test_a_cutoff_is_taken_as_the_float32_it_counts_at(tmp_path, cutoff):
    runs = api.open_cache(two_configurations_cache(tmp_path, "sigmoid").root, cutoff=cutoff)
    assert np.float32(runs.cutoff) == np.float32(cutoff)
    assert repr(runs.study()).count(f"cutoff {float(np.float32(cutoff)):.2g}") >= 1
