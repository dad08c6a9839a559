"""One-knob-at-a-time attribution, checked on synthetic maps whose differences are known."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.attribution import Effect, attribute, plan_attribution
from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.study import StudyRun, default_reference


def test_plan_changes_one_knob_at_a_time_and_walks_to_the_target() -> None:
    base = RunConfig()
    target = parse_config_spec("device=gpu:0,batch=64,xla=on,tf32=off")
    plan = plan_attribution(base, target)
    assert [step.knob for step in plan.steps] == ["device", "batch", "tf32", "xla"]
    alone = [step.alone for step in plan.steps]
    assert alone == [
        RunConfig(device="gpu:0"),
        RunConfig(batch=64),
        RunConfig(tf32=False),
        RunConfig(xla=True),
    ]
    # Each cumulative step starts where the previous one ended, and the last one is the target.
    for earlier, later in zip(plan.steps, plan.steps[1:], strict=False):
        assert later.before == earlier.after
    assert plan.steps[0].before == base and plan.steps[-1].after == target
    assert plan.configs()[0] == base and target in plan.configs()
    assert len(plan.configs()) == len(set(plan.configs()))


def test_the_batch_knob_carries_its_context_and_position() -> None:
    plan = plan_attribution(RunConfig(), parse_config_spec("batch=8,context=copies,position=3"))
    (step,) = plan.steps
    assert step.knob == "batch"
    assert step.alone == RunConfig(batch=8, context="copies", position=3)
    assert "batch 1 → 8" in step.change and "position 0 → 3" in step.change


def test_equal_configurations_have_no_steps() -> None:
    plan = plan_attribution(RunConfig(batch=4), RunConfig(batch=4))
    assert plan.steps == () and plan.configs() == [RunConfig(batch=4)]


def _maps() -> dict[RunConfig, list[np.ndarray]]:
    rng = np.random.default_rng(7)
    base = rng.random((32, 32), dtype=np.float32)
    batch = base.copy()
    batch[0, :4] = np.nextafter(batch[0, :4], np.float32(2))  # 4 pixels, 1 ULP each
    xla = batch.copy()
    xla[5, 5] = np.float32(0.49) if base[5, 5] >= 0.5 else np.float32(0.51)  # one flip
    noisy_b64 = batch.copy()
    noisy_b64[9, 9] += np.float32(1e-3)
    return {
        RunConfig(): [base, base.copy()],
        RunConfig(batch=64): [batch, noisy_b64],
        RunConfig(xla=True): [base.copy()],
        RunConfig(batch=64, xla=True): [xla],
    }


def test_each_row_is_the_direct_comparison_of_its_two_configurations() -> None:
    maps = _maps()
    plan = plan_attribution(RunConfig(), RunConfig(batch=64, xla=True))
    result = attribute(plan, lambda config: maps.get(config, []), cutoff=0.5)
    for row in result.rows:
        if row.kind in ("alone", "cumulative", "total"):
            first, second = (next(c for c in maps if c.label() == label) for label in row.compared)
            direct = compare_maps(maps[first][0], maps[second][0], 0.5)
            assert row.effect is not None
            assert (row.effect.max_ulp, row.effect.differing_pixels, row.effect.flips) == (
                direct.max_ulp,
                direct.differing_pixels,
                direct.flips,
            )
    alone = {row.knob: row.effect for row in result.of("alone")}
    assert alone["batch"] == Effect.between(maps[RunConfig()][0], maps[RunConfig(batch=64)][0], 0.5)
    assert alone["batch"].max_ulp == 1 and alone["batch"].differing_pixels == 4
    assert alone["xla"].differing_pixels == 0  # xla alone changes nothing here
    cumulative = {row.knob: row.effect for row in result.of("cumulative")}
    assert cumulative["xla"].flips == 1  # but after the batch change it flips a pixel
    assert result.total.effect is not None and result.total.effect.flips == 1


def test_repeat_spread_is_its_own_line_and_unmeasured_configurations_say_so() -> None:
    maps = _maps()
    del maps[RunConfig(xla=True)]
    plan = plan_attribution(RunConfig(), RunConfig(batch=64, xla=True))
    result = attribute(plan, lambda config: maps.get(config, []), cutoff=0.5)
    repeats = {row.compared[0]: row.effect for row in result.of("repeats")}
    assert set(repeats) == {"cpu b1 r0", "cpu b64 r0"}
    assert repeats["cpu b1 r0"].differing_pixels == 0  # type: ignore[union-attr]
    assert repeats["cpu b64 r0"].differing_pixels == 1  # type: ignore[union-attr]
    assert repeats["cpu b64 r0"].max_abs > 9e-4  # type: ignore[union-attr]
    unmeasured = [row for row in result.rows if row.effect is None]
    assert [(row.kind, row.knob) for row in unmeasured] == [("alone", "xla")]
    assert result.to_dict()["rows"][1]["measured"] is False


def test_at_risk_counts_pixels_of_the_first_map_near_the_cutoff() -> None:
    first = np.array([[0.5, 0.5001, 0.6]], dtype=np.float32)
    second = first + np.float32(0.0002)
    effect = Effect.between(first, second, 0.5)
    assert effect.at_risk == 2 and effect.flips == 0


def test_two_named_runs_of_one_configuration_are_compared_as_named() -> None:
    first = np.full((4, 4), 0.25, dtype=np.float32)
    second = np.nextafter(first, np.float32(1))
    plan = plan_attribution(RunConfig(), RunConfig())
    result = attribute(plan, lambda config: [first, second], 0.5, ends=(first, second))
    assert result.total.effect is not None and result.total.effect.max_ulp == 1
    assert "share every knob" in result.sentences()[0]


def test_a_step_the_runtime_refuses_waits_for_the_knobs_it_needs() -> None:
    base, target = RunConfig(onednn=False, threads=4), RunConfig(runtime="jax")
    plan = plan_attribution(base, target)
    # JAX with oneDNN off or four threads is refused: those knobs change first.
    assert [step.knob for step in plan.steps] == ["onednn", "threads", "runtime"]
    assert [step.after for step in plan.steps][-1] == target
    runtime_step = plan.steps[-1]
    assert runtime_step.alone is None  # JAX with the base's other knobs: not a configuration
    assert target in plan.configs() and None not in plan.configs()


def test_a_refused_step_is_said_as_refused_not_as_missing_runs() -> None:
    base, target = RunConfig(onednn=False), RunConfig(runtime="jax")
    plan = plan_attribution(base, target)
    values = np.linspace(0.2, 0.8, 64, dtype=np.float32).reshape(8, 8)
    maps = {config: [values + np.float32(0.001 * i)] for i, config in enumerate(plan.configs())}
    attribution = attribute(plan, lambda config: maps.get(config, []), 0.5)
    alone = {row.knob: row for row in attribution.of("alone")}
    assert alone["runtime"].compared == (base.label(), "refused")
    text = " ".join(attribution.sentences())
    assert "Not measurable alone (runtime)" in text and "no run yet" not in text


def test_without_a_default_run_the_reference_is_the_one_nearest_the_defaults() -> None:
    values = np.zeros((4, 4), np.float32)

    def run(config: RunConfig) -> StudyRun:
        label = f"{config.label()} r0"
        return StudyRun(label, label, config, 0, values)

    fresh_jax = run(RunConfig(runtime="jax", repeat_scope="fresh"))
    batch = run(RunConfig(batch=2))
    assert default_reference([fresh_jax, batch]) is batch
    assert default_reference([batch, run(RunConfig())]).config == RunConfig()


def test_a_total_of_zero_headlines_no_knob() -> None:
    """Batch 64 moves the map with oneDNN on; with oneDNN off nothing does, and
    explain from the first to the last must not name batch as the largest single knob."""
    base, target = RunConfig(onednn=True), RunConfig(batch=64, onednn=False)
    plan = plan_attribution(base, target)
    plain = np.full((8, 8), 0.25, dtype=np.float32)
    moved = plain.copy()
    moved[2, 3] = np.nextafter(moved[2, 3], np.float32(1))
    maps = {
        base: [plain],
        RunConfig(batch=64, onednn=True): [moved],
        RunConfig(onednn=False): [plain],
        target: [plain],
    }
    sentences = attribute(plan, lambda config: maps.get(config, []), 0.5).sentences()
    assert not any(line.startswith("Largest single knob") for line in sentences), sentences
    assert sentences[0] == (
        "The two are bitwise equal in total: no knob explains a difference (batch alone moves "
        "it by up to 1 ULP; the other knobs' settings undo that)."
    )
