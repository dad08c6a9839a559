"""The diagnosis says only what was measured, with the figure behind it."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.diagnosis import DOCS, diagnose
from segdiff_gui.core.study import Study, StudyRun


def _run(config: RunConfig, repeat: int, probabilities: np.ndarray) -> StudyRun:
    label = f"{config.label()} r{repeat}"
    return StudyRun(label, label, config, repeat, probabilities)


def _base() -> np.ndarray:
    values = np.linspace(0.3, 0.7, 400, dtype=np.float32).reshape(20, 20)
    return values


def test_cpu_only_runs_never_speak_for_gpus_and_name_unvaried_knobs() -> None:
    base = _base()
    batch = base + np.float32(1e-3)
    study = Study(
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
    assert any("Keep the batch" in f.sentence for f in advice)
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
    study = Study(
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
    study = Study([_run(RunConfig(), 0, base), _run(RunConfig(threads=1), 0, base.copy())])
    advice = [f.sentence for f in diagnose(study) if f.topic == "advice"]
    assert advice == [
        "Every run is bitwise equal to cpu b1 r0: nothing to avoid among the configurations "
        "measured."
    ]
    assert any(f.topic == "not measured" and "Repeatability" in f.sentence for f in diagnose(study))
