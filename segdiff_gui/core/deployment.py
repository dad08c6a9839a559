"""What a diagnosis says about converted models: the model that ships is the LiteRT
or ONNX Runtime conversion, not the Keras model, so its own difference from the Keras model is
the figure to act on, with the runtime's documentation of the conversion."""

from __future__ import annotations

from dataclasses import dataclass

from segdiff_gui.core.attribution import Effect, plan_attribution
from segdiff_gui.core.findings import Finding, plural
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.study import GroupAnalysis, StudyRun

__all__ = ["Conversion", "artefact_findings", "deployment_advice", "is_conversion"]


@dataclass(frozen=True)
class Conversion:
    """A run that differs from the reference in its runtime alone, a converted one."""

    runtime: str
    label: str
    effect: Effect


def is_conversion(reference_runtime: str, runtime: str) -> bool:
    """From the Keras model to its conversion (not between two conversions)."""
    return RUNTIMES[reference_runtime].conversion is None and bool(RUNTIMES[runtime].conversion)


def _measured(conversion: Conversion) -> str:
    effect = conversion.effect
    return f"{plural(effect.flips, 'flip')} (max |Δ| {effect.max_abs:.3g})"


def deployment_advice(conversions: list[Conversion], cutoff_text: str) -> list[Finding]:
    """One sentence over every conversion measured: the one that moves the map most, the one
    that moves it least, and what to do before shipping it."""
    if not conversions:
        return []
    order = sorted(conversions, key=lambda c: (c.effect.flips, c.effect.max_abs))
    best, worst = order[0], order[-1]
    # Two runs of one runtime (full int8 calibrated on other images) are told by their labels.
    same = best.runtime == worst.runtime and best is not worst

    def named(conversion: Conversion) -> str:
        title = RUNTIMES[conversion.runtime].title
        return f"{title} ({conversion.label})" if same else title

    worst_title = named(worst)
    sentence = (
        f"The converted model is what ships, so measure it, not the Keras model: converting "
        f"to {worst_title} alone gives {_measured(worst)} {cutoff_text} here"
    )
    if best is not worst:
        sentence += f", {named(best)} {_measured(best)}"
    sentence += (
        ". Check the converted model's accuracy against ground truth on a test set (the "
        "test-set sweep with masks) before shipping it"
    )
    quantization = RUNTIMES[worst.runtime].conversion
    if worst.effect.flips and quantization and quantization.quantization != "float32":
        sentence += (
            "; where its change matters, calibrate on more representative images or keep "
            "float weights"
            if quantization.calibrated
            else "; where its change matters, keep float weights or quantize fully with a "
            "representative dataset and compare again"
        )
    return [
        Finding(
            "advice",
            sentence + ".",
            f"{worst.effect.flips:,} flips, max |Δ| {worst.effect.max_abs:.3g}",
            RUNTIMES[worst.runtime].link,
        )
    ]


def _nearest(study: GroupAnalysis, runs: list[StudyRun]) -> StudyRun:
    """Of one artefact's runs, the one whose configuration is nearest the reference's (its
    runtime aside: the artefact has its own)."""

    def away(run: StudyRun) -> tuple[int, int]:
        steps = plan_attribution(study.reference.config, run.config).steps
        return (sum(step.knob != "runtime" for step in steps), run.repeat)

    return min(runs, key=away)


def artefact_findings(study: GroupAnalysis, cutoff_text: str) -> list[Finding]:
    """What each of the user's own artefacts beside its Keras source does against the
    source's reference run: its own model, not a knob of the source's, so it is
    said apart, with what to do before shipping it."""
    if study.reference.artefact:
        return []
    by_artefact: dict[str, list[StudyRun]] = {}
    for run in study.runs:
        if run.artefact:
            by_artefact.setdefault(run.artefact, []).append(run)
    findings = []
    for name, runs in by_artefact.items():
        run = _nearest(study, runs)
        effect = study.effect(run)
        title = RUNTIMES[run.config.runtime].family
        findings.append(
            Finding(
                "knobs",
                f"Your artefact {name}, run as it is under {title} ({run.configuration} "
                f"against its Keras source's {study.reference.label}), changes "
                f"{plural(effect.differing_pixels, 'pixel')} by up to {effect.max_ulp:,} ULP "
                f"(max |Δ| {effect.max_abs:.3g}) and flips {plural(effect.flips, 'pixel')} "
                f"{cutoff_text}.",
                f"{effect.max_ulp:,} ULP, {plural(effect.flips, 'flip')}",
            )
        )
        findings.append(
            Finding(
                "advice",
                f"Your artefact {name} is what ships, not its source: its own difference "
                f"({_measured(Conversion(run.config.runtime, run.label, effect))} {cutoff_text}) "
                "is the figure to act on; the layer comparison (segdiff layers with --source) "
                "says in which layer it is born, and the test-set sweep with masks what it "
                "costs in accuracy.",
                f"{effect.flips:,} flips, max |Δ| {effect.max_abs:.3g}",
            )
        )
    return findings
