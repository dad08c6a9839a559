"""A test-set sweep: summarising stored runs (images without the reference, model versions),
and the session every front end drives, its runs computed by the fake engine."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import RunFinished
from segdiff_gui.runner.outcome import follow
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.runner.sweeps import SweepSession, summarise_sweep, sweep_groups
from segdiff_gui.storage import ResultCache
from tests.factories import make_record

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
    summary = summarise_sweep(cache, sweep_groups(cache.records()), cutoff=0.5)
    assert [image.image for image in summary.images] == ["a.png", "b.png"]
    assert summary.without_reference == ["c.png"]
    with pytest.raises(InputError, match=r"cpu b2: has no run on any image \(configurations: "):
        summarise_sweep(cache, sweep_groups(cache.records()), cutoff=0.5, reference="cpu b2")


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


# The session: the one workflow every front end drives (the fake engine computes its runs).
CONFIGS = (RunConfig(), RunConfig(batch=2), RunConfig(precision="mixed_bfloat16"))


def _masks(folder: Path, images, shape=(32, 32)) -> Path:
    folder.mkdir()
    for image in images:
        Image.fromarray(np.full(shape, 255, np.uint8)).save(folder / image.name)
    return folder


def test_a_session_runs_every_image_through_the_drive_then_summarises_what_it_stored(
    fake_engine, demo, small_images, cache, tmp_path
):
    request = MatrixRequest(demo[0], tuple(small_images), cache, CONFIGS, repeats=1)
    masks = _masks(tmp_path / "masks", small_images[:3])  # the fourth image has none
    session = SweepSession(cache, cutoff=0.5, request=request, masks=masks)
    seen: list[object] = []

    def drive(runner):
        return follow(runner, seen.append)

    result = session.run(drive)
    assert any(isinstance(message, RunFinished) for message in seen)  # the front end's drive
    assert len(result.plan.runs) == len(small_images) * len(CONFIGS)
    assert {run["status"] for run in result.outcome.runs} == {"finished"} and not result.failed
    summary = result.summarised()
    assert [image.image for image in summary.images] == [path.name for path in small_images]
    assert summary.reference == "cpu b1"
    assert sorted(summary.configurations) == ["cpu b1", "cpu b1 bf16", "cpu b2"]
    rows = {row["configuration"]: row for row in summary.rows()}
    assert rows["cpu b1 bf16"]["max_ulp"] > rows["cpu b2"]["max_ulp"] > 0
    assert rows["cpu b1"]["truth_images"] == 3 and rows["cpu b1"]["mean_dice"] is not None
    # Run again: every run is served from the cache, and the summary is the same.
    again = SweepSession(cache, cutoff=0.5, request=request, masks=masks).run()
    assert {run["status"] for run in again.outcome.runs} == {"cached"}
    assert again.summarised().to_dict() == summary.to_dict()
    # The stored runs alone, as `segdiff sweep` and a study of the cache read them.
    stored = SweepSession(cache, cutoff=0.5, runs=cache.records(), masks=masks).run()
    assert stored.plan is None and stored.summarised().to_dict() == summary.to_dict()


def test_a_session_names_its_reference_as_ref_does_and_says_one_it_lacks(
    fake_engine, demo, small_images, cache
):
    request = MatrixRequest(demo[0], tuple(small_images), cache, CONFIGS[:2], repeats=1)
    SweepSession(cache, request=request).run()
    for name in ("cpu b2", "cpu b2 r0"):  # a configuration, or a run's label: its configuration
        summary = SweepSession(cache, runs=cache.records(), reference=name).summarise()
        assert summary.reference == "cpu b2"
    with pytest.raises(InputError) as raised:
        SweepSession(cache, runs=cache.records(), reference="cpu b64").summarise()
    assert str(raised.value).startswith("cpu b64: ") and "\n" not in str(raised.value)


def test_masks_that_do_not_fit_are_refused_before_any_run(
    fake_engine, demo, small_images, cache, tmp_path
):
    request = MatrixRequest(demo[0], tuple(small_images), cache, CONFIGS[:1], repeats=1)
    wrong = _masks(tmp_path / "wrong", small_images[1:2], shape=(10, 12))
    with pytest.raises(
        InputError, match=r"small_1.png: is 10×12 but its image small_1.png is 32×32"
    ):
        SweepSession(cache, request=request, masks=wrong)
    other = tmp_path / "other"
    other.mkdir()
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(other / "elsewhere.png")
    with pytest.raises(InputError) as before:
        SweepSession(cache, request=request, masks=other)
    assert cache.records() == []  # nothing ran
    # The same failure found once the maps are read (runs stored without masks): one line.
    SweepSession(cache, request=request).run()
    with pytest.raises(InputError) as after:
        SweepSession(cache, runs=cache.records(), masks=other).summarise()
    assert (
        str(before.value)
        == str(after.value)
        == (f"{other}: holds no mask whose name matches an image of the sweep")
    )


def test_a_sweep_whose_runs_all_failed_has_no_summary_and_says_so(
    fake_engine, demo, small_images, cache
):
    # The fake engine sees no GPU: every run fails, none is stored.
    request = MatrixRequest(
        demo[0], tuple(small_images[:2]), cache, (RunConfig(device="gpu:0"),), repeats=1
    )
    result = SweepSession(cache, request=request).run()
    assert result.summary is None and len(result.failed) == 2
    with pytest.raises(InputError, match="^sweep: no runs to summarise$"):
        result.summarised()
