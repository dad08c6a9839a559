"""Two stored runs named by a person: the words that name them, and the measurement between
exactly them, as the CLI's and the API's explain both take them from runner/explain.py."""

from dataclasses import replace

import numpy as np

from segdiff_gui.runner.explain import compared_runs, measure_between
from segdiff_gui.storage import ResultCache
from tests.factories import make_record, sealed


def _on(record, host):
    return replace(record, provenance=record.provenance.updated({"hostname": host}))


def test_the_two_runs_are_named_with_their_hosts_only_where_these_differ():
    values = np.full((4, 4), 0.5, np.float32)
    first = sealed(_on(make_record("m", values, "cpu b1 r0"), "laptop"))
    second = sealed(_on(make_record("m", values, "cpu b64 r0"), "laptop"))
    same = compared_runs(first, second)
    assert same == f"cpu b1 r0 ({first.short_id}) against cpu b64 r0 ({second.short_id})"
    elsewhere = compared_runs(first, _on(second, "gpu-server"))
    assert elsewhere == (
        f"cpu b1 r0 ({first.short_id} on laptop) against "
        f"cpu b64 r0 ({second.short_id} on gpu-server)"
    )


def test_the_total_is_measured_between_exactly_the_two_runs(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    reference = np.full((4, 4), 0.5, np.float32)
    moved = reference.copy()
    moved[0, :2] = 0.75  # two pixels cross the cutoff of 0.6
    first = sealed(make_record("m", reference, "cpu b1 r0"))
    second = sealed(make_record("m", moved, "cpu b64 r0"))
    for record in (first, second):
        cache.write_run(record)
    attribution = measure_between(cache, [first, second], first, second, 0.6)
    assert (attribution.plan.base, attribution.plan.target) == (
        first.run_config,
        second.run_config,
    )
    total = attribution.total.effect
    assert total is not None and total.flips == 2
