"""Summarising a sweep from stored runs: images without the reference, model versions."""

import hashlib

import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.runner.sweeps import summarise_sweep, sweep_groups
from segdiff_gui.storage import ResultCache
from tests.storage.test_cache import make_record

RETRAINED = hashlib.sha256(b"retrained").hexdigest()


def _store(cache: ResultCache, image: str, label: str, config: RunConfig, **changes) -> None:
    values = np.linspace(0.4, 0.6, 16, dtype=np.float32).reshape(4, 4)
    record = make_record(
        "m",
        values,
        f"{label} r0",
        config=config.to_dict(),
        target_name=image,
        target_hash=hashlib.sha256(image.encode()).hexdigest(),
        **changes,
    )
    cache.write_run(record)


def test_images_without_the_reference_are_left_out_and_named(tmp_path):
    cache = ResultCache(tmp_path)
    for image in ("a.png", "b.png"):
        _store(cache, image, "cpu b1", RunConfig())
        _store(cache, image, "cpu b8", RunConfig(batch=8))
    _store(cache, "c.png", "cpu b8", RunConfig(batch=8))  # its reference run failed
    summary = summarise_sweep(cache, sweep_groups(cache.records()), 0.5)
    assert [image.image for image in summary.images] == ["a.png", "b.png"]
    assert summary.without_reference == ["c.png"]
    with pytest.raises(InputError, match=r"cpu b2: has no run on any image \(configurations: "):
        summarise_sweep(cache, sweep_groups(cache.records()), 0.5, reference="cpu b2")


def test_two_versions_of_one_model_are_not_averaged_together(tmp_path):
    cache = ResultCache(tmp_path)
    _store(cache, "a.png", "cpu b1", RunConfig())
    _store(cache, "a.png", "cpu b1", RunConfig(), model_hash=RETRAINED)
    with pytest.raises(
        InputError,
        match="m.keras: was run in 2 versions .*; choose one by the group of any of its images",
    ):
        sweep_groups(cache.records())
    (group,) = sweep_groups(cache.records(), model=RETRAINED[:8])  # the model id listed chooses
    assert group[0].model_hash == RETRAINED
