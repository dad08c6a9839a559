"""The one loader (storage/loading.py): a group is the same runs whichever name chooses it,
and its exact run is chosen with it."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.loading import RunsSource
from tests.factories import make_record


def test_a_reference_chooses_the_runs_its_group_has_without_it(tmp_path):
    values = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    trial = RunConfig(precision="mixed_bfloat16", keep_float32=("conv1",)).to_dict()
    exact = RunConfig(precision="float64").to_dict()
    records = [
        make_record("m", values, "cpu b1 r0"),
        make_record("m", values + np.float32(0.01), "cpu b8 r0"),
        make_record("m", values, "cpu b1 bf16 r0", config=trial),  # a precision repair's trial
        make_record("m", values.astype(np.float64), "cpu b1 fp64 r0", config=exact),
    ]
    source = RunsSource(ResultCache(tmp_path / "c"), records, "here", [])
    (whole,) = source.choose()
    (by_reference,) = source.choose(ref="cpu b8 r0")
    assert [r.key for r in whole.records] == [records[0].key, records[1].key]
    assert [r.key for r in by_reference.records] == [r.key for r in whole.records]
    assert by_reference.reference is not None and by_reference.reference.key == records[1].key
    assert whole.exact is not None and whole.exact.key == records[3].key
    assert by_reference.exact == whole.exact and by_reference.title == whole.title
