"""A sweep runs the test set as ``model.predict(x, batch_size=B)`` does: the images in the
set's order cut into consecutive batches of B (the last one the remainder), each batch
computed once for every image it holds; shards cut between batches. The runner's side, with
the fake engine (its child computes a batch once for the targets it holds, as the real one
does, and says "inference" for each batch it computes)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import BatchProgress, PlanReady
from segdiff_gui.core.runtime_defaults import Machine
from segdiff_gui.core.shards import shard_slice, shard_unit
from segdiff_gui.resources import demo_model
from segdiff_gui.runner.outcome import follow
from segdiff_gui.runner.plan import plan_matrix
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache
from tests.factories import small_image_set

IMAGES = 11  # batches of 4: 4 + 4 + 3


def test_a_sweeps_batches_are_the_sets_consecutive_images_the_last_one_short(tmp_path):
    images = small_image_set(tmp_path / "images", IMAGES)
    configs = [RunConfig(batch=1), RunConfig(batch=4)]
    plan = plan_matrix(
        demo_model(), images, configs, cache=ResultCache(tmp_path / "cache"), repeats=1,
        sweep=True, machine=Machine(),
    )  # fmt: skip
    by_target = {run.target: run for run in plan.runs if run.config.batch == 4}
    for target, run in by_target.items():
        start = target - target % 4
        assert run.batch == tuple(range(start, min(start + 4, IMAGES)))
        assert run.position == target - start and run.batch[run.position] == target
    assert by_target[10].batch == (8, 9, 10)  # predict's last batch: the remainder
    # A full batch led by its target is what a run of that one target computes: one key.
    assert by_target[4].batch_position is None and by_target[5].batch_position == 1
    assert by_target[8].batch_position == 0  # led by it, but short: a sweep's own batch
    # Batch by batch, the targets of a batch together (its forward pass made once).
    order = [(run.config.batch, run.batch) for run in plan.runs]
    assert [batch for size, batch in order if size == 4] == sorted(
        [batch for size, batch in order if size == 4]
    )


@pytest.mark.parametrize("batch", [1, 4, 8, 16])
def test_a_sweep_computes_each_batch_once_per_configuration_and_repeat(
    tmp_path, fake_engine, batch
):
    """⌈N/B⌉ forward passes per configuration and repeat, counted from what the child says
    as it computes; every image gets its run, each from its own row of its batch."""
    images = small_image_set(tmp_path / "images", IMAGES)
    cache = ResultCache(tmp_path / "cache")
    request = MatrixRequest(
        demo_model(), tuple(images), cache,
        (RunConfig(batch=batch), RunConfig(batch=batch, threads=1)), repeats=2, sweep=True,
    )  # fmt: skip
    seen: list[object] = []
    follow(request.start(), seen.append)
    planned = next(message for message in seen if isinstance(message, PlanReady))
    labels = {run.key: run.label for run in request.plan([]).runs}
    passes = Counter(
        labels[message.key]
        for message in seen
        if isinstance(message, BatchProgress) and message.what == "inference"
    )
    expected = math.ceil(IMAGES / batch)
    assert planned.total == IMAGES * 2 * 2
    assert set(passes.values()) == {expected} and len(passes) == 4  # 2 configs × 2 repeats
    stored = [cache.read_run(run.key, with_map=False) for run in request.plan([]).runs]
    assert len(stored) == IMAGES * 4
    hashes = {record.target_name: record.target_hash for record in stored}
    for record in stored:
        target = int(record.target_name[4:6])
        start = target - target % batch
        chunk = [hashes[f"img_{i:02d}.png"] for i in range(start, min(start + batch, IMAGES))]
        assert record.batch_hashes == chunk and record.position == target - start


def test_shards_are_cut_between_batches_and_hold_every_image_once():
    for count in (5, 11, 64, 100, 513):
        for largest in (1, 4, 8, 64):
            for total in (1, 2, 3, 7):
                unit = shard_unit(count, total, largest)
                parts = [shard_slice(count, (k, total), unit) for k in range(1, total + 1)]
                assert [i for part in parts for i in part] == list(range(count))
                if unit > 1:
                    assert unit == largest
                    assert all(part.start % largest == 0 for part in parts)
                    assert all(len(part) for part in parts)  # no shard left empty
                else:
                    assert largest == 1 or math.ceil(count / largest) < total


def test_a_sweeps_images_are_checked_before_any_child_and_the_first_bad_one_is_said(
    tmp_path, fake_engine
):
    """A set's images are decoded side by side while planning: the one said is the first bad
    one in the set's order, whichever thread met it first."""
    images = small_image_set(tmp_path / "images", 40)
    for index in (29, 7, 31):
        images[index].write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)  # a damaged PNG
    request = MatrixRequest(
        demo_model(), tuple(images), ResultCache(tmp_path / "cache"), (RunConfig(),),
        repeats=1, sweep=True,
    )  # fmt: skip
    with pytest.raises(InputError) as raised:
        request.plan()
    assert images[7].name in str(raised.value)
    assert not any((tmp_path / "cache" / "runs").glob("*/*.h5"))
