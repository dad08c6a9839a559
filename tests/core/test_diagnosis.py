"""The diagnosis says only what was measured, with the figure behind it."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.diagnosis import DOCS, diagnose
from segdiff_gui.core.study import GroupAnalysis, StudyRun


def _run(config: RunConfig, repeat: int, probabilities: np.ndarray) -> StudyRun:
    label = f"{config.label()} r{repeat}"
    return StudyRun(label, label, config, repeat, probabilities)


def _base() -> np.ndarray:
    values = np.linspace(0.3, 0.7, 400, dtype=np.float32).reshape(20, 20)
    return values


def test_cpu_only_runs_never_speak_for_gpus_and_name_unvaried_knobs() -> None:
    base = _base()
    batch = base + np.float32(1e-3)
    study = GroupAnalysis(
        [
            _run(RunConfig(), 0, base),
            _run(RunConfig(), 1, base.copy()),
            _run(RunConfig(batch=64), 0, batch),
        ],
        cutoff=0.5,
    )
    findings = diagnose(study)
    text = " ".join(f.sentence for f in findings)
    assert "No GPU run was measured" in text
    assert "TF32 off" not in text and "op determinism (tf." not in text
    knobs = [f for f in findings if f.topic == "knobs"]
    assert len(knobs) == 1 and "batch 1 → 64" in knobs[0].sentence
    assert knobs[0].link == DOCS["batch"]
    advice = [f for f in findings if f.topic == "advice"]
    assert any("Keep batch 1, as in the reference" in f.sentence for f in advice)
    assert any("at-risk" in f.sentence and "cutoff" in f.sentence for f in advice)
    not_measured = [f.sentence for f in findings if f.topic == "not measured"]
    assert any("XLA" in s and "the device" in s for s in not_measured)
    repeatable = [f for f in findings if f.topic == "repeatability"]
    assert "cpu b1" in repeatable[0].sentence and repeatable[0].figure == "bitwise equal"


def test_nondeterminism_and_tf32_advice_come_from_gpu_runs() -> None:
    base = _base()
    gpu = RunConfig(device="gpu:0")
    gpu_off = RunConfig(device="gpu:0", tf32=False)
    noisy = base + np.float32(2e-4)
    study = GroupAnalysis(
        [
            _run(RunConfig(), 0, base),
            _run(gpu, 0, base + np.float32(1e-4)),
            _run(gpu, 1, noisy),
            _run(gpu_off, 0, base + np.float32(1e-6)),
        ],
        cutoff=0.5,
    )
    findings = diagnose(study)
    text = " ".join(f.sentence for f in findings)
    assert "No GPU run was measured" not in text
    assert "gpu:0 b1 is nondeterministic" in text
    determinism = next(f for f in findings if "Turn on op determinism" in f.sentence)
    assert determinism.link == DOCS["determinism"]
    tf32 = next(f for f in findings if f.sentence.startswith("TF32 off"))
    assert "brings gpu:0 closer" in tf32.sentence and tf32.link == DOCS["tf32"]


def test_identical_runs_need_no_avoiding() -> None:
    base = _base()
    study = GroupAnalysis([_run(RunConfig(), 0, base), _run(RunConfig(threads=1), 0, base.copy())])
    advice = [f.sentence for f in diagnose(study) if f.topic == "advice"]
    assert advice == [
        "Every run is bitwise equal to cpu b1 r0: nothing to avoid among the configurations "
        "measured."
    ]
    assert any(f.topic == "not measured" and "Repeatability" in f.sentence for f in diagnose(study))


def test_nan_only_differences_are_named_not_called_equal() -> None:
    base = _base()
    broken = base.copy()
    broken[-2:, :] = (
        np.nan
    )  # 40 foreground values NaN in one map only, no ULP difference anywhere else
    study = GroupAnalysis(
        [_run(RunConfig(), 0, base), _run(RunConfig(precision="mixed_float16"), 0, broken)]
    )
    findings = diagnose(study)
    text = " ".join(f.sentence for f in findings)
    assert "40 values NaN in one map only" in text
    assert "bitwise equal" not in text and "Every run is" not in text
    cutoff = [f for f in findings if f.topic == "cutoff"]
    assert cutoff and "change class" in cutoff[0].sentence  # NaN is background: flips counted
    keep = next(f for f in findings if f.sentence.startswith("Keep float32, as in the reference"))
    assert "40 values NaN in one map only" in keep.figure


def test_another_machines_run_is_no_repeat_and_no_knob() -> None:
    base = _base()
    other = base + np.float32(1e-6)
    here, there = RunConfig(), RunConfig(batch=8)
    study = GroupAnalysis(
        [
            StudyRun("a", "cpu b1 r0", here, 0, base, "laptop"),
            StudyRun("b", "cpu b1 r1", here, 1, base.copy(), "laptop"),
            StudyRun("c", "cpu b1 r0", here, 0, other, "server"),  # merged under a new key
            StudyRun("d", "cpu b8 r0", there, 0, other.copy(), "server"),
        ],
        cutoff=0.5,
    )
    assert set(study.verdicts) == {"cpu b1"}  # the server's run is not a third... repeat
    assert study.verdicts["cpu b1"].deterministic
    findings = diagnose(study)
    knobs = [f.sentence for f in findings if f.topic == "knobs"]
    assert any(s.startswith("server: cpu b1 was computed on another machine;") for s in knobs)
    assert any("server: cpu b8 was computed on another machine and in batch" in s for s in knobs)
    assert not any("Changing the batch" in s for s in knobs)
    assert not any("Keep batch" in f.sentence for f in findings)


def test_determinism_advice_cites_only_a_measured_deterministic_run() -> None:
    base = _base()
    gpu, det = RunConfig(device="gpu:0"), RunConfig(device="gpu:0", determinism=True)
    runs = [
        _run(RunConfig(), 0, base),
        _run(gpu, 0, base + np.float32(1e-4)),
        _run(gpu, 1, base + np.float32(2e-4)),
    ]
    advice = next(f for f in diagnose(GroupAnalysis(runs)) if "op determinism" in f.sentence)
    assert "no run with it on was measured here" in advice.sentence
    runs += [_run(det, 0, base + np.float32(1e-4)), _run(det, 1, base + np.float32(1e-4))]
    advice = next(f for f in diagnose(GroupAnalysis(runs)) if "op determinism" in f.sentence)
    assert "with it on, gpu:0 b1 det was repeatable here" in advice.sentence


def test_tied_classes_are_said_in_the_diagnosis_and_the_summary() -> None:
    from segdiff_gui.cli.summary import differences_table, plain_sentences

    rng = np.random.default_rng(6)
    logits = rng.normal(size=(8, 8, 3))
    float32 = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    bf16 = np.full((8, 8, 3), 0.33398438, dtype=np.float32)
    study = GroupAnalysis(
        [_run(RunConfig(), 0, float32), _run(RunConfig(precision="mixed_bfloat16"), 0, bf16)]
    )
    (row,) = study.rows()
    assert (row["ties"], row["flips"]) == (64, 0)
    tied = [f for f in diagnose(study) if "tied" in f.figure]
    assert len(tied) == 1 and "64 pixels of cpu b1 bf16 r0" in tied[0].sentence
    assert "counted as ties, not flips" in tied[0].sentence
    (sentence,) = plain_sentences(study)
    assert "0 class flips (argmax); 64 pixels tied" in sentence
    headers = [column.header for column in differences_table(study, "x.png").columns]
    assert "tied (no flip)" in headers


def test_repeats_in_fresh_processes_say_what_a_rerun_of_the_program_changes() -> None:
    base = _base()
    gpu = RunConfig(device="gpu:0")
    fresh = RunConfig(device="gpu:0", repeat_scope="fresh")
    other_kernels = base.copy()
    other_kernels[3, 4] = np.nextafter(other_kernels[3, 4], np.float32(1), dtype=np.float32)
    runs = [_run(gpu, r, base.copy()) for r in range(3)]
    runs += [_run(fresh, 0, base.copy()), _run(fresh, 1, other_kernels)]
    findings = [f for f in diagnose(GroupAnalysis(runs, cutoff=0.5)) if f.topic == "repeatability"]
    across = [f for f in findings if "across processes" in f.sentence]
    assert len(across) == 1
    assert across[0].sentence.startswith(
        "gpu:0 b1 is repeatable within a process (3 repeats) but differs across processes "
        "(gpu:0 b1 fresh: up to 1 ULP over 2 fresh processes)"
    )
    assert across[0].link == DOCS["repeat_scope"]
    # Equal across processes too: said as such.
    same = [_run(gpu, r, base.copy()) for r in range(2)]
    same += [_run(fresh, r, base.copy()) for r in range(2)]
    sentences = [f.sentence for f in diagnose(GroupAnalysis(same, cutoff=0.5))]
    assert any("and across fresh processes (gpu:0 b1 fresh, 2 processes)" in s for s in sentences)


def test_conversions_get_deployment_advice_with_their_runtimes_documentation() -> None:
    """A conversion is not a knob to keep as in the reference: the converted model is what
    ships, so the advice names the conversion that moves the map most, the one that moves it
    least, and links the runtime's page on that conversion."""
    base = _base()
    int8 = base.copy()
    int8.reshape(-1)[195:215] = 0.49  # the pixels at 0.5 and above there cross the cutoff
    study = GroupAnalysis(
        [
            _run(RunConfig(), 0, base),
            _run(RunConfig(runtime="litert"), 0, base + np.float32(1e-7)),
            _run(RunConfig(runtime="litert-int8"), 0, int8),
            _run(RunConfig(batch=4), 0, base + np.float32(1e-6)),
        ],
        cutoff=0.5,
    )
    findings = diagnose(study)
    knobs = {f.sentence.split(",")[0]: f for f in findings if f.topic == "knobs"}
    int8_finding = next(f for s, f in knobs.items() if "LiteRT full int8" in s)
    assert int8_finding.link.endswith("post_training_integer_quant")
    advice = [f for f in findings if f.topic == "advice"]
    (shipping,) = [f for f in advice if "what ships" in f.sentence]
    assert "converting to LiteRT full int8 alone gives" in shipping.sentence
    assert "LiteRT float32 0 flips" in shipping.sentence
    assert "calibrate on more representative images" in shipping.sentence
    assert shipping.link.endswith("post_training_integer_quant")
    # The batch is still a knob to keep; the runtime is not (it is the deployment).
    assert any("Keep batch 1" in f.sentence for f in advice)
    assert not any("Keep runtime" in f.sentence for f in advice)


def test_full_int8_runs_calibrated_on_other_images_are_not_repeats() -> None:
    """Two litert-int8 runs of one configuration, calibrated on other image sets, are two
    models: never "nondeterministic" repeats of one."""
    base = _base()
    config = RunConfig(runtime="litert-int8")
    runs = [
        _run(RunConfig(), 0, base),
        StudyRun(
            "a", "litert-int8 cpu b1 cal2#aaaa r0", config, 0, base + 0.01, variant="cal2#aaaa"
        ),
        StudyRun(
            "b", "litert-int8 cpu b1 cal1#bbbb r0", config, 0, base - 0.01, variant="cal1#bbbb"
        ),
    ]
    study = GroupAnalysis(runs, cutoff=0.5)
    assert study.verdicts == {}
    text = " ".join(f.sentence for f in diagnose(study))
    assert " is nondeterministic" not in text and "Turn on op determinism" not in text
    assert "cal2#aaaa" in text and "cal1#bbbb" in text


def test_the_quietest_cutoff_keeps_pixels_in_both_classes() -> None:
    """A map spanning 0.39–0.59 (a weak model's): cutoffs above its largest value have no
    pixel at risk because they have no foreground; they are never the advice."""
    from segdiff_gui.core.cutoff_findings import quietest_cutoff

    reference = np.linspace(0.388, 0.587, 64 * 64, dtype=np.float32).reshape(64, 64)
    best, count = quietest_cutoff(reference, margin=0.004, cutoff=0.55)
    assert 0.388 < best <= 0.587 and count > 0
    assert quietest_cutoff(reference, 0.004, 0.99) == (0.99, 0)  # none in range: the cutoff


def test_a_remedy_is_offered_where_it_was_measured_and_named_where_it_was_not() -> None:
    """Batch 64 moves the map with oneDNN on and nothing with it off: diagnosis
    offers oneDNN off with its figure. Without the oneDNN-off runs it names the two runs that
    would measure it."""
    base = _base()
    batched = base + np.float32(1e-3)
    on, on64 = RunConfig(onednn=True), RunConfig(onednn=True, batch=64)
    off, off64 = RunConfig(onednn=False), RunConfig(onednn=False, batch=64)
    measured = GroupAnalysis(
        [_run(on, 0, base), _run(on64, 0, batched), _run(off, 0, base + np.float32(2e-3)),
         _run(off64, 0, base + np.float32(2e-3))],
        cutoff=0.5,
    )  # fmt: skip
    remedy = [f for f in diagnose(measured) if f.sentence.startswith("With oneDNN off")]
    assert len(remedy) == 1 and remedy[0].topic == "advice"
    assert "cpu b64 onednn-off equals cpu b1 onednn-off bit for bit" in remedy[0].sentence
    assert "while with oneDNN on, as in the reference, it moved 400 pixels" in remedy[0].sentence
    assert "Set oneDNN off (onednn=off)" in remedy[0].sentence
    unmeasured = GroupAnalysis([_run(on, 0, base), _run(on64, 0, batched)], cutoff=0.5)
    (suggestion,) = [f for f in diagnose(unmeasured) if f.measure and "oneDNN" in f.sentence]
    assert suggestion.topic == "not measured"
    assert suggestion.measure == ("onednn=off", "batch=64,onednn=off")
    assert "Whether oneDNN off removes the batch" in suggestion.sentence


def test_emulated_tf32_is_worded_as_a_prediction_and_kept_apart_from_a_measurement() -> None:
    """An emulate=tf32 run on the CPU predicts a GPU's TF32 flips; a GPU's own
    TF32 on/off pair is measured, said beside it, never mixed with it."""
    base = _base()
    emulated = base + np.float32(3e-3)  # moves 3 pixels across 0.5 (values 0.4972…0.4992)
    runs = [_run(RunConfig(), 0, base), _run(RunConfig(emulate="tf32"), 0, emulated)]
    findings = diagnose(GroupAnalysis(runs, cutoff=0.5))
    predicted = next(f for f in findings if f.sentence.startswith("Predicted, not measured"))
    assert predicted.topic == "advice" and predicted.figure == "3 flips predicted"
    assert (
        "on a GPU with TF32 on (TensorFlow's and JAX's default on Ampere and later GPUs), "
        "expect about 3 flips at cutoff 0.5 (emulated on this CPU: cpu b1 emu-tf32 r0 against "
        "cpu b1 r0 moves 400 pixels" in predicted.sentence
    )
    assert predicted.sentence.endswith("; to avoid them: tf32=off.")
    assert predicted.link == DOCS["tf32"]
    text = " ".join(f.sentence for f in findings)
    assert "Measured on" not in text
    missing = next(f for f in findings if f.sentence.startswith("No GPU run was measured"))
    assert "the emulated TF32 run predicts TF32's rounding only" in missing.sentence

    gpu = RunConfig(device="gpu:0")
    runs += [
        _run(gpu, 0, base + np.float32(5e-3)),
        _run(RunConfig(device="gpu:0", tf32=False), 0, base + np.float32(1e-6)),
    ]
    findings = diagnose(GroupAnalysis(runs, cutoff=0.5))
    measured = next(f for f in findings if f.sentence.startswith("Measured on gpu:0"))
    assert "TF32 on against off (gpu:0 b1 r0 against gpu:0 b1 tf32-off r0) flips" in (
        measured.sentence
    )
    assert measured.sentence.endswith("the emulation on this CPU predicted about 3 and 0.003.")
    assert "No GPU run was measured" not in " ".join(f.sentence for f in findings)


def test_without_a_gpu_the_emulation_is_offered_where_this_cpu_can_run_it() -> None:
    base = _base()
    study = GroupAnalysis([_run(RunConfig(), 0, base), _run(RunConfig(batch=64), 0, base.copy())])
    missing = next(f for f in diagnose(study) if f.sentence.startswith("No GPU run"))
    assert missing.sentence.endswith("or run emulate=tf32 to predict what TF32 does, on this CPU.")
    assert missing.measure == ("emulate=tf32",)
    bf16 = RunConfig(precision="mixed_bfloat16")  # no emulation in bfloat16: nothing offered
    study = GroupAnalysis(
        [_run(bf16, 0, base), _run(RunConfig(precision="mixed_bfloat16", batch=64), 0, base.copy())]
    )
    missing = next(f for f in diagnose(study) if f.sentence.startswith("No GPU run"))
    assert missing.measure == () and "emulate" not in missing.sentence


def test_keeping_a_knob_as_in_the_reference_reads_as_one_plain_sentence() -> None:
    """Not "Keep oneDNN as in the reference (oneDNN TensorFlow's default)": a knob left
    to its runtime's choice is said as such, the knob named once, for every knob advised."""
    from segdiff_gui.core.knobs import KNOBS

    base = _base()
    study = GroupAnalysis(
        [_run(RunConfig(), 0, base), _run(RunConfig(onednn=False), 0, base + 1e-3)]
    )
    (keep,) = [f.sentence for f in diagnose(study) if f.sentence.startswith("Keep ")]
    assert keep.startswith(
        "Keep oneDNN at TensorFlow's default, as in the reference, wherever maps are compared: "
        "oneDNN alone moved the map by up to "
    )
    assert KNOBS["xla"].setting_text(None) == "XLA at model.predict's choice"
    assert KNOBS["xla"].setting_text(False) == "XLA off"
    assert KNOBS["threads"].setting_text(1) == "1 intra-op thread"
    assert KNOBS["threads"].setting_text(0) == "the default intra-op thread count"
    assert KNOBS["device"].setting_text("gpu:0") == "device gpu:0"
    for knob in KNOBS.knobs:
        if knob.advise_keeping:
            assert "(" not in knob.title, knob.name  # a title sits inside other parentheses
