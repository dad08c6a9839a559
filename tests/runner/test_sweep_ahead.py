"""A sweep's images are summarised while it computes (runner/sweeps.SummariesAhead): once an
image's runs are all stored its maps are read and summarised beside the child, and the summary
at the end takes each one made from the same runs, reference and truth, reading no map again.
With the fake engine, which writes its runs as the real child does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.resources import demo_model
from segdiff_gui.runner import sweeps
from segdiff_gui.runner.outcome import follow
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.runner.sweeps import SummariesAhead, SweepSession
from segdiff_gui.storage import ResultCache
from tests.factories import small_image_set

IMAGES = 9  # batches of 4: 4 + 4 + 1


def _request(tmp_path: Path) -> MatrixRequest:
    images = tuple(small_image_set(tmp_path / "images", IMAGES))
    return MatrixRequest(
        demo_model(), images, ResultCache(tmp_path / "cache"),
        (RunConfig(), RunConfig(batch=4)), repeats=2, sweep=True,
    )  # fmt: skip


def test_every_image_is_summarised_as_its_runs_are_stored_and_the_end_reads_no_map(
    tmp_path, fake_engine, monkeypatch
):
    request = _request(tmp_path)
    sweep = SweepSession(request.cache, request=request)
    result = sweep.run()
    assert result.summary is not None and len(result.summary.images) == IMAGES

    # The same runs summarised at the end alone, every map read there: the same figures.
    alone = SweepSession(sweep.store, runs=sweep.stored()).summarise()
    assert [image.to_dict() for image in result.summary.images] == [
        image.to_dict() for image in alone.images
    ]
    assert result.summary.to_dict() == alone.to_dict()

    # Summarised again from what was made ahead, with every read of a map refused: each
    # image's summary is taken as made.
    def no_reading(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a map was read again at the end")

    monkeypatch.setattr(sweeps, "load_study", no_reading)
    assert sweep.summarise().to_dict() == alone.to_dict()


def test_an_image_whose_run_failed_is_left_to_the_end_which_says_so(
    tmp_path, fake_engine, monkeypatch
):
    """The fake child fails every run of one image: that image is never made ahead, and the
    end's summary leaves it out as one without its reference run, as it always has."""
    monkeypatch.setenv("FAKE_ENGINE_FAIL_ON_IMAGE", "img_05.png")
    request = _request(tmp_path)
    sweep = SweepSession(request.cache, request=request)
    runner = sweep.start()
    ahead = SummariesAhead(sweep.store, runner.plan, sweep.cutoff, None, None)
    runner.listen(ahead.heard)
    follow(runner, lambda _message: None)
    made = ahead.finish()
    names = {summary.image.image for summary in made.values()}
    assert names == {f"img_{i:02d}.png" for i in range(IMAGES)} - {"img_05.png"}
    summary = sweep.summarise()
    assert len(summary.images) == IMAGES - 1 and summary.without_reference == []


def test_a_summary_made_against_another_reference_or_truth_is_made_again(tmp_path, fake_engine):
    request = _request(tmp_path)
    sweep = SweepSession(request.cache, request=request)
    result = sweep.run()
    assert result.summary is not None
    other = SweepSession(sweep.store, runs=sweep.stored(), reference="cpu b4")
    expected = other.summarise().to_dict()
    assert expected["reference"] != result.summary.to_dict()["reference"]
    # The session that ran them, asked against the other reference: not the ones made ahead.
    sweep.reference = "cpu b4"
    assert sweep.summarise().to_dict() == expected


def test_the_window_summarises_at_its_own_cutoff_and_masks_taking_only_what_fits(
    tmp_path, fake_engine, monkeypatch
):
    """The window summarises a sweep it ran in a session of its own, at the cutoff and with
    the masks on show: what was made ahead at another cutoff is made again, never taken."""
    request = _request(tmp_path)
    sweep = SweepSession(request.cache, request=request)
    sweep.run()
    made = sweep.made_ahead()
    assert len(made) == IMAGES
    at_another = SweepSession(sweep.store, runs=sweep.stored(), cutoff=0.3, made=made)
    alone = SweepSession(sweep.store, runs=sweep.stored(), cutoff=0.3).summarise()
    assert at_another.summarise().to_dict() == alone.to_dict()

    def no_reading(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a map was read again")

    monkeypatch.setattr(sweeps, "load_study", no_reading)
    same = SweepSession(sweep.store, runs=sweep.stored(), made=made).summarise()
    assert same.cutoff == sweep.cutoff and len(same.images) == IMAGES


def test_a_run_with_nothing_to_compare_is_summarised_without_its_map(tmp_path, monkeypatch):
    """One configuration, one repeat, no masks: each image's one run is compared with nothing,
    and its summary is what reading its map would give (the study path, kept for a softmax
    map too), made from its record alone."""
    from segdiff_gui.core.sweep import summarise_image
    from segdiff_gui.storage.studies import load_study
    from tests.factories import make_record

    cache = ResultCache(tmp_path / "cache")
    rng = np.random.default_rng(0)
    sigmoid = make_record("a", rng.random((6, 5), dtype=np.float32))
    scores = rng.random((6, 5, 3), dtype=np.float32)
    softmax = make_record(
        "b", scores / scores.sum(axis=2, keepdims=True), kind="softmax", raw_output_shape=[]
    )
    for record in (sigmoid, softmax):
        cache.write_run(record)
    expected = {}
    for record in (sigmoid, softmax):
        study = load_study(cache, [record], 0.5, record)
        expected[record.key] = (summarise_image(record.target_name, study, None).to_dict(),
                                study.multiclass)  # fmt: skip

    def no_reading(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a map was read")

    monkeypatch.setattr(sweeps, "load_study", no_reading)
    for record in (sigmoid, softmax):
        stored = cache.read_run(record.key, with_map=False)
        found = sweeps.summarised_image(cache, [stored], stored, 0.5, None)
        assert found is not None
        assert (found[0].to_dict(), found[1]) == expected[record.key]
