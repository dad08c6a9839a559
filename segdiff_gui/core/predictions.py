"""What an emulation on this CPU predicts for a GPU, kept apart from what a GPU measured
(core/diagnosis.py asks).

A run with ``emulate=tf32`` rounds the inputs of convolutions and matrix multiplies to TF32
on the CPU: its difference from the reference run without it predicts what TF32 does on a
GPU. The sentences say "predicted" and "emulated on this CPU"; a GPU's own runs with TF32 on
and off are "measured", and where both exist the two are set side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from segdiff_gui.core.attribution import Effect, single_knob
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.findings import Finding, plural
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.study import GroupAnalysis, StudyRun

__all__ = ["emulation_findings", "emulation_missing"]

# Who computes float32 with TF32 unless told otherwise (PyTorch's matmuls are off by default).
_WHERE_DEFAULT = "TensorFlow's and JAX's default on Ampere and later GPUs"


def _emulated(study: GroupAnalysis, firsts: Mapping[str, StudyRun]) -> StudyRun | None:
    """The run that differs from the reference in its emulation alone, on its machine."""
    reference = study.reference
    return next(
        (
            run
            for run in firsts.values()
            if run.config.emulate != "off"
            and run.machine == reference.machine
            and single_knob(reference.config, run.config) == "emulate"
        ),
        None,
    )


def _measured_pairs(firsts: Mapping[str, StudyRun]) -> list[tuple[StudyRun, StudyRun]]:
    """A GPU's runs with TF32 on and off that differ in nothing else: (on, off)."""
    return [
        (on, off)
        for on in firsts.values()
        for off in firsts.values()
        if on.config.is_gpu
        and on.config.tf32
        and on.machine == off.machine
        and single_knob(on.config, off.config) == "tf32"
    ]


def emulation_findings(
    study: GroupAnalysis, firsts: Mapping[str, StudyRun], cutoff_text: str
) -> list[Finding]:
    """The prediction of an emulated run, and beside it what a GPU measured, if one did."""
    run = _emulated(study, firsts)
    if run is None:
        return []
    reference = study.reference
    predicted = study.effect(run)
    if predicted.flips:
        expect = f"expect about {plural(predicted.flips, 'flip')} {cutoff_text}"
        avoid = "; to avoid them: tf32=off"
    else:
        expect, avoid = f"expect no flip {cutoff_text}", ""
    findings = [
        Finding(
            "advice",
            f"Predicted, not measured: on a GPU with TF32 on ({_WHERE_DEFAULT}), {expect} "
            f"(emulated on this CPU: {run.label} against {reference.label} moves "
            f"{plural(predicted.differing_pixels, 'pixel')} by up to {predicted.max_ulp:,} ULP, "
            f"max |Δ| {predicted.max_abs:.3g}){avoid}.",
            f"{plural(predicted.flips, 'flip')} predicted",
            KNOBS["tf32"].link,
        )
    ]
    for on, off in _measured_pairs(firsts):
        measured = Effect.between(off.probabilities, on.probabilities, study.cutoff)
        findings.append(
            Finding(
                "advice",
                f"Measured on {on.config.device}: TF32 on against off ({on.label} against "
                f"{off.label}) flips {plural(measured.flips, 'pixel')} {cutoff_text} and moves "
                f"the map by up to {measured.max_ulp:,} ULP (max |Δ| {measured.max_abs:.3g}); "
                f"the emulation on this CPU predicted about {predicted.flips:,} and "
                f"{predicted.max_abs:.3g}.",
                f"{measured.flips:,} measured vs {predicted.flips:,} predicted",
                KNOBS["tf32"].link,
            )
        )
    return findings


def emulation_missing(study: GroupAnalysis) -> Finding:
    """Said where no GPU run was measured: what the runs here cannot say of a GPU, and, where
    this CPU can, the emulated run that would predict TF32's share of it."""
    reference = study.reference.config
    emulated = any(run.config.emulate != "off" for run in study.runs)
    if emulated:
        return Finding(
            "not measured",
            "No GPU run was measured: the emulated TF32 run predicts TF32's rounding only, not "
            "a GPU's own kernels (cuDNN's algorithms, their order of sums, atomics); add a gpu "
            "configuration on a machine that has one to measure them.",
        )
    sentence = (
        "No GPU run was measured, so nothing here speaks for GPUs (TF32, cuDNN algorithms, "
        "atomics); add a gpu configuration on a machine that has one."
    )
    emulating = _emulating(reference)
    if emulating is None:
        return Finding("not measured", sentence)
    emulation = KNOBS.changed_spec(emulating)
    return Finding(
        "not measured",
        f"{sentence[:-1]}, or run {emulation} to predict what TF32 does, on this CPU.",
        measure=(emulation,),
    )


def _emulating(config: RunConfig) -> RunConfig | None:
    """``config`` with TF32 emulated, where it can be (TensorFlow on a CPU, in float32)."""
    try:
        return replace(config, emulate="tf32")
    except ConfigError:
        return None
