import numpy as np
import pytest

from segdiff_gui.core.analysis import flip_mask
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.cutoff_curve import flip_curve
from segdiff_gui.core.spread import at_risk_mask, observed_margin, repeat_verdict
from segdiff_gui.core.study import GroupAnalysis, StudyRun


def noisy_pair(seed: int, size: int = 128) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.random((size, size), dtype=np.float32)
    b = (a + rng.normal(0, 2e-3, a.shape)).astype(np.float32)
    b[:3, :3] = np.nan
    b[5, :4] = [0.0, -0.0, 1e-45, 1.0]
    return a, b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curve_agrees_with_brute_force_thresholding_everywhere(seed):
    a, b = noisy_pair(seed)
    curve = flip_curve(a, b)
    # The grid, the data's own values (where the count steps) and the ends of the range.
    samples = np.concatenate([curve.cutoffs, a.ravel()[:200], b.ravel()[:200], [0.0, 1.0]])
    samples = samples[np.isfinite(samples)]
    counts = curve.at(samples)
    for cutoff, count in zip(samples, counts, strict=True):
        assert count == np.count_nonzero(flip_mask(a, b, float(cutoff))), cutoff
    assert np.array_equal(curve.flips, curve.at(curve.cutoffs))


def test_curve_refuses_multiclass_maps():
    maps = np.zeros((2, 2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="argmax"):
        flip_curve(maps, maps)


def test_repeat_verdicts():
    a = np.random.default_rng(0).random((16, 16), dtype=np.float32)
    assert repeat_verdict([a, a.copy(), a.copy()]).sentence() == (
        "bitwise deterministic over 3 repeats"
    )
    b = a.copy()
    b[3, 4] = np.nextafter(b[3, 4], np.float32(2))
    b[7, 7] += np.float32(1e-3)
    verdict = repeat_verdict([a, b])
    assert not verdict.deterministic and verdict.varying_pixels == 2
    assert verdict.max_spread == pytest.approx(1e-3, rel=1e-3)
    assert verdict.sentence().startswith("nondeterministic: max spread 0.001")


def test_every_flip_is_at_risk():
    a, b = noisy_pair(4)
    b = np.where(np.isnan(b), a, b)
    margin = observed_margin(a, [b])
    assert np.all(at_risk_mask(a, margin, 0.5)[flip_mask(a, b, 0.5)])
    assert not at_risk_mask(a, 0.0, 0.5).any()
    softmax = np.random.default_rng(5).dirichlet([1, 1, 1], (20, 20)).astype(np.float32)
    moved = np.roll(softmax, 1, axis=-1) * 0.01 + softmax * 0.99
    risky = at_risk_mask(softmax, observed_margin(softmax, [moved]), 0.5)
    assert np.all(risky[flip_mask(softmax, moved, 0.5)])


def test_study_orders_reference_rows_and_pairs():
    a, b = noisy_pair(6, 32)
    b = np.where(np.isnan(b), a, b)
    runs = [
        StudyRun("k2", "cpu b64 r0", RunConfig(batch=64), 0, b),
        StudyRun("k1", "cpu b1 r0", RunConfig(), 0, a),
        StudyRun("k3", "cpu b1 r1", RunConfig(), 1, a.copy()),
    ]
    study = GroupAnalysis(runs, cutoff=0.5)
    assert study.reference.key == "k1"
    assert [row["label"] for row in study.rows()] == ["cpu b64 r0", "cpu b1 r1"]
    assert study.verdicts["cpu b1"].deterministic
    pairs = study.pairwise()
    assert pairs["flips"][0][1] == pairs["flips"][1][0] == study.rows()[0]["flips"]
    assert pairs["max_ulp"][1][2] == 0
    with pytest.raises(ValueError, match="map shape"):
        GroupAnalysis([runs[0], StudyRun("k4", "x", RunConfig(), 0, np.zeros((2, 2), np.float32))])


def test_spread_measures_max_minus_min_and_names_nan_and_zero_signs():
    x = np.float32(0.3)
    up, down = np.nextafter(x, np.float32(1)), np.nextafter(x, np.float32(0))
    verdict = repeat_verdict([np.float32([[x]]), np.float32([[up]]), np.float32([[down]])])
    assert verdict.max_ulp == 2 and verdict.varying_pixels == 1
    zeros = repeat_verdict([np.float32([[0.0]]), np.float32([[-0.0]])])
    assert not zeros.deterministic and zeros.varying_pixels == 0
    assert "equal in value" in zeros.sentence()
    nan = repeat_verdict([np.float32([[0.5, 0.2]]), np.float32([[np.nan, 0.2]])])
    assert nan.nan_pixels == 1 and nan.varying_pixels == 1 and nan.max_ulp == 0
    assert "1 of them NaN in some repeats only" in nan.sentence()


def test_nan_is_counted_apart_from_ulps_and_location():
    from segdiff_gui.core.analysis import compare_maps

    result = compare_maps(np.full((4, 4), 0.2, np.float32), np.full((4, 4), np.nan, np.float32))
    assert (result.nan_mismatches, result.max_ulp, result.max_location) == (16, 0, None)
    assert (
        compare_maps(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32)).max_location
        is None
    )


def test_merged_runs_from_another_machine_are_not_repeats():
    a = np.random.default_rng(8).random((8, 8), dtype=np.float32)
    b = a.copy()
    b[0, 0] = np.nextafter(b[0, 0], np.float32(2))
    runs = [
        StudyRun("k1", "cpu b1 r0", RunConfig(), 0, a, "laptop"),
        StudyRun("k2", "cpu b1 r1", RunConfig(), 1, a.copy(), "laptop"),
        StudyRun("k3", "server: cpu b1 r0", RunConfig(), 0, b, "server"),
        StudyRun("k4", "server: cpu b1 r1", RunConfig(), 1, b.copy(), "server"),
    ]
    study = GroupAnalysis(runs)
    assert study.reference.key == "k1"
    assert all(v.deterministic for v in study.verdicts.values())
    assert set(study.verdicts) == {"cpu b1", "server: cpu b1"}


def test_a_study_moved_to_another_cutoff_equals_a_fresh_one():
    a, b = noisy_pair(9, 64)
    b = np.where(np.isnan(b), a, b)
    runs = [
        StudyRun("k1", "cpu b1 r0", RunConfig(), 0, a),
        StudyRun("k2", "cpu b64 r0", RunConfig(batch=64), 0, b),
    ]
    study = GroupAnalysis(runs, cutoff=0.5)
    study.rows(), study.verdicts, study.margin  # noqa: B018 - fill the caches to carry over
    for cutoff in (0.3, 0.55, 0.9):
        moved, fresh = study.at_cutoff(cutoff), GroupAnalysis(runs, cutoff=cutoff)
        assert moved.rows() == fresh.rows()
        assert np.array_equal(moved.at_risk, fresh.at_risk)
        assert np.array_equal(moved.any_flips(), fresh.any_flips())


def test_a_merged_run_never_becomes_the_reference_while_a_local_one_exists():
    # A bundle's run claiming to be this machine's "cpu b1 r0" made every genuine run "differ".
    a = np.full((2, 2), 0.5, np.float32)
    forged = StudyRun("k1", "cpu b1 r0", RunConfig(), 0, a, "laptop", merged_from="evil.h5")
    local = StudyRun("k2", "cpu b64 r0", RunConfig(batch=64), 0, a, "laptop")
    assert GroupAnalysis([forged, local]).reference.key == "k2"
    assert GroupAnalysis([forged]).reference.key == "k1"  # a bundle's own runs: one of them it is


@pytest.mark.parametrize("small_blocks", [False, True])
@pytest.mark.parametrize("shape", [(40, 30), (40, 30, 1), (40, 30, 3)])
def test_a_studys_flips_and_classes_at_each_cutoff_match_the_plain_threshold(
    shape, small_blocks, monkeypatch
):
    # A binary study makes the reference's classes, each run's classes, flips and
    # counts in one pass of row blocks dealt out to the cores; all must equal thresholding
    # each map on its own, whichever core got which block.
    from segdiff_gui.core import analysis, parallel
    from segdiff_gui.core.analysis import class_map

    channels = shape[2] if len(shape) == 3 else 1
    rng = np.random.default_rng(7)
    ref = rng.random(shape, dtype=np.float32)
    if small_blocks:  # blocks of 3 rows: 14 of them, dealt out to 3 "cores"
        monkeypatch.setattr(analysis, "_BLOCK_BYTES", 3 * ref[:1].nbytes)
        monkeypatch.setattr(parallel, "_cores", lambda: 3)
    ref[5, 5] = np.nan  # below every cutoff, as class_map has it
    if channels > 1:
        ref[0, 0] = [0.5, 0.5, 0.0]  # a tie: not a flip
    others = [np.nextafter(ref, np.float32(1)), (ref + rng.normal(0, 0.05, shape)).astype("f4")]
    runs = [StudyRun("r", "cpu b1 r0", RunConfig(), 0, ref)] + [
        StudyRun(f"k{i}", f"cpu b{i + 2} r0", RunConfig(batch=i + 2), 0, m)
        for i, m in enumerate(others)
    ]
    study = GroupAnalysis(runs, cutoff=0.5)
    for cutoff in (0.5, 0.25, float(ref.flat[17]), 0.9):
        study = study.at_cutoff(cutoff)
        for run in runs:
            expected = class_map(run.probabilities, cutoff).astype(np.uint8)
            assert np.array_equal(study.classes(run), expected)
        for run in study.others:
            expected = flip_mask(ref, run.probabilities, cutoff)
            assert np.array_equal(study.flips(run), expected)
            assert study.flip_count(run) == np.count_nonzero(expected)
        assert not study.flips(runs[0]).any()  # the reference, asked after the others
