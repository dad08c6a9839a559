"""A cache holding the exact reference (a float64 map) opens in the window: its
float32 runs are shown and compared as ever, and the exact run, offered to the views by a
plan's cached runs or as a run that finished, is not shown among them (it is a comparison of
its own, beside the reference). On synthetic runs: no TensorFlow child."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from tests.factories import make_record


def test_the_window_shows_the_float32_runs_of_a_cache_holding_an_exact_run(window, tmp_path):
    exact = np.linspace(0.45, 0.55, 48 * 64, dtype=np.float64).reshape(48, 64) + 1e-9
    records = [
        make_record("m", exact.astype(np.float32), "cpu b1 r0"),
        make_record("m", np.nextafter(exact.astype(np.float32), np.float32(1)), "cpu b64 r0"),
        make_record("m", exact, "cpu b1 r0", config=RunConfig(precision="float64").to_dict()),
    ]
    cache = ResultCache(tmp_path / "runs")
    for record in records:
        cache.write_run(record)
    model = window.model
    model.set_runs(cache, records)  # as a session hands the window its plan's cached runs
    assert [run.label for run in model.runs] == ["cpu b1 r0", "cpu b64 r0"]
    model.add_run(cache, cache.read_run(records[2].key, with_map=False))  # it finished
    assert records[2].key not in model.records
    assert model.study is not None and model.study.reference.label == "cpu b1 r0"
    assert [row["max_ulp"] for row in model.study.rows()] == [1]
    model.selected_pixel = (10, 10)
    values = model.pixel_values(10, 10)
    assert [value.ulps for value in values if not value.is_exact] == [0, 1]
    # The inspector reads the exact value beside them (its own row, last).
    assert [value.is_exact for value in values] == [False, False, True]
