"""A study opened from a cache reads each run's map from the store once, whatever it is asked:
the analysis of its group holds the maps, and every question after the first answers from
them."""

from __future__ import annotations

from collections import Counter

from segdiff_gui import api
from segdiff_gui.storage import ResultCache


def test_compare_then_explain_read_each_map_once(fake_demo_cache, monkeypatch):
    reads: Counter[str] = Counter()
    read_run = ResultCache.read_run

    def counted(self, key, with_map=True):
        reads[key] += with_map
        return read_run(self, key, with_map)

    monkeypatch.setattr(ResultCache, "read_run", counted)
    study = api.open_cache(fake_demo_cache.root).study()
    study.compare()
    explanation = study.explain()  # the reference against the run that differs most
    assert explanation.attribution.plan.steps  # measured, knob by knob
    assert set(reads) == {run.key for run in study.runs} and len(reads) > 2
    assert set(reads.values()) == {1}
