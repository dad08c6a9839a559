"""The exact reference's map in the cache: stored and read back as little-endian
float64, only for a run whose precision is float64 (any other dtype for either kind of run is
damage, said in one line), carried whole by a bundle, and kept out of the float32 runs a study
compares."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.storage import ResultCache, merge_bundle, write_bundle
from segdiff_gui.storage.loading import analyses, read_source
from segdiff_gui.storage.studies import (
    comparable_groups,
    exact_of,
    group_of,
    load_study,
    study_run,
)
from tests.factories import make_record
from tests.hostile.expect import assert_one_line

EXACT = RunConfig(precision="float64").to_dict()


def _exact_values() -> np.ndarray:
    """float64 values no float32 holds: rounding them anywhere on the way shows."""
    return np.linspace(0.3, 0.7, 32 * 32, dtype=np.float64).reshape(32, 32) + 1e-12


def _cache_with_exact(root) -> tuple[ResultCache, list]:
    cache = ResultCache(root)
    exact = _exact_values()
    records = [
        make_record("m", exact.astype(np.float32), "cpu b1 r0"),
        make_record("m", exact, "cpu b1 r0", config=EXACT),
    ]
    for record in records:
        cache.write_run(record)
    return cache, records


def test_the_exact_map_reads_back_float64_bit_for_bit(tmp_path):
    cache, (_, exact) = _cache_with_exact(tmp_path / "cache")
    assert exact.label == "cpu b1 fp64 r0"
    read = cache.read_run(exact.key)
    assert read.probabilities.dtype == np.dtype("<f8")
    assert read.probabilities.tobytes() == exact.probabilities.tobytes()
    # A bundle carries it whole, and a merge stores it so.
    bundle = tmp_path / "runs.h5"
    assert write_bundle(cache, [exact.key], bundle) == 1
    merged = ResultCache(tmp_path / "merged")
    merge_bundle(bundle, merged)
    assert merged.read_run(exact.key).probabilities.tobytes() == exact.probabilities.tobytes()


@pytest.mark.parametrize(
    ("config", "dtype", "said"),
    [
        (EXACT, np.float32, "a float64 run's map is float64, not float32"),
        (RunConfig().to_dict(), np.float64, "a float32 run's map is float32, not float64"),
    ],
)
def test_a_map_of_the_other_dtype_is_never_written(tmp_path, config, dtype, said):
    record = make_record("m", _exact_values().astype(dtype), "cpu b1 r0", config=config)
    with pytest.raises(ValueError, match=said):
        ResultCache(tmp_path).write_run(record)


def test_an_exact_run_whose_map_is_float32_is_damage_said_in_one_line(tmp_path):
    cache, (plain, exact) = _cache_with_exact(tmp_path / "cache")
    path = cache.run_path(exact.key)
    with h5py.File(path, "r+") as handle:
        del handle["probabilities"]
        handle.create_dataset("probabilities", data=_exact_values().astype("<f4"), chunks=True,
                              compression="gzip", shuffle=True)  # fmt: skip
    scan = ResultCache(cache.root).scan(with_maps=True)
    assert [record.key for record in scan.records] == [plain.key]
    (damaged,) = scan.damaged
    assert_one_line(
        damaged, path, "<f4 values; segdiff stores a float64 run's map as little-endian float64"
    )


def test_the_exact_run_is_kept_out_of_the_float32_runs_a_study_compares(tmp_path):
    cache, (plain, exact) = _cache_with_exact(tmp_path / "cache")
    records = cache.scan().records
    (group,) = comparable_groups(records)
    assert [record.key for record in group] == [plain.key]
    assert [record.key for record in group_of(records, plain)] == [plain.key]
    assert exact_of(records, plain).key == exact.key
    assert load_study(cache, records, 0.5).runs[0].key == plain.key
    assert len(load_study(cache, records, 0.5).runs) == 1
    (studied,) = analyses(read_source(cache, "", lambda damaged: None), 0.5)
    assert [run.key for run in studied.study.runs] == [plain.key]
    # Handed one anyway, a study refuses it rather than count float32 steps of a rounded map.
    with pytest.raises(ValueError, match="cpu b1 fp64 r0: not a float32 map"):
        GroupAnalysis(
            [study_run(plain, plain.probabilities), study_run(exact, exact.probabilities)]
        )
