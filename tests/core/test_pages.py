"""Which large arrays come in ordinary pages (core/pages.py): what a new group makes once
(flip masks, colour indices), not what a cutoff or a view mode makes in place of others."""

import mmap

import numpy as np

from segdiff_gui.core import pages
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.study import GroupAnalysis, StudyRun


def in_ordinary_pages(array: np.ndarray) -> bool:
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_only_large_arrays_get_a_mapping_of_their_own(monkeypatch):
    monkeypatch.setattr(pages, "ORDINARY_FROM_BYTES", 1000)
    large = pages.empty_in_ordinary_pages((10, 100), np.uint8)
    assert in_ordinary_pages(large) and large.shape == (10, 100) and not large.any()
    large[:] = 7  # writable
    assert not in_ordinary_pages(pages.empty_in_ordinary_pages((10, 99), np.uint8))
    assert in_ordinary_pages(pages.empty_in_ordinary_pages((1, 1), np.float32, from_bytes=0))


def test_a_new_groups_masks_grow_into_ordinary_pages_a_new_cutoffs_do_not(monkeypatch):
    monkeypatch.setattr(pages, "ORDINARY_FROM_BYTES", 64)
    rng = np.random.default_rng(3)
    maps = [rng.random((16, 16), dtype=np.float32) for _ in range(3)]
    runs = [StudyRun(f"k{i}", f"cpu b{i + 1} r0", RunConfig(batch=i + 1), 0, m)
            for i, m in enumerate(maps)]  # fmt: skip
    study = GroupAnalysis(runs, cutoff=0.5)
    assert all(in_ordinary_pages(mask) for mask in study.flips_of(study.others))
    moved = study.at_cutoff(0.25)
    assert not any(in_ordinary_pages(mask) for mask in moved.flips_of(moved.others))
    for run in moved.others:  # the same masks either way
        expected = (maps[0] >= np.float32(0.25)) != (run.probabilities >= np.float32(0.25))
        assert np.array_equal(moved.flips(run), expected)


def test_colour_indices_grow_into_ordinary_pages_only_for_new_views(monkeypatch):
    from segdiff_gui.ui.level_indices import level_indices

    monkeypatch.setattr(pages, "ORDINARY_FROM_BYTES", 64)
    plane = np.linspace(0, 1, 256, dtype=np.float32).reshape(16, 16)
    grown, redrawn = level_indices(plane, (0.0, 1.0), grows=True), level_indices(plane, (0, 1))
    assert in_ordinary_pages(grown) and not in_ordinary_pages(redrawn)
    assert np.array_equal(grown, redrawn)
