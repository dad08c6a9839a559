"""Plain sentences that answer "is this normal, why, and how do I avoid it?" for one study.

Every sentence is built from a measurement of this study and carries the figure behind it.
Nothing is said about what was not measured: without a GPU run there is no GPU statement, and
a knob that no run changed is listed as not measured, not as harmless.
"""

from __future__ import annotations

from dataclasses import replace

from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.attribution import KNOB_GROUPS, Effect, plan_attribution, single_knob
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.cutoff_findings import cutoff_findings, quietest_cutoff
from segdiff_gui.core.deployment import (
    Conversion,
    artefact_findings,
    deployment_advice,
    is_conversion,
)
from segdiff_gui.core.exact_findings import exact_findings, exact_missing
from segdiff_gui.core.findings import Finding, plural, verb
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.predictions import emulation_findings, emulation_missing
from segdiff_gui.core.remedies import remedy_findings
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.study import GroupAnalysis, StudyRun

__all__ = ["DOCS", "TOPICS", "Finding", "by_topic", "diagnose"]  # Finding: core/findings.py

# The questions a person asks, in the order they ask them: each topic's heading.
TOPICS = {
    "repeatability": "Is it repeatable?",
    "knobs": "What changes the maps?",
    "cutoff": "What it does at the cutoff",
    "exact": "Which answer is right?",
    "advice": "How to avoid it",
    "not measured": "Not measured",
}

# Where TensorFlow documents each knob, and how sentences name it: from the knob registry.
DOCS = {knob.name: knob.link for knob, _ in KNOB_GROUPS}
_KNOB_NAMES = {knob.name: knob.title for knob, _ in KNOB_GROUPS}


def _effect_text(effect: Effect, cutoff_text: str) -> str:
    if effect.differing_pixels == 0:
        return "leaves every pixel equal in value"
    nans = (
        f"; {plural(effect.nan_mismatches, 'value')} NaN in one map only"
        if effect.nan_mismatches
        else ""
    )
    return (
        f"changes {plural(effect.differing_pixels, 'pixel')} by up to "
        f"{effect.max_ulp:,} ULP (max |Δ| {effect.max_abs:.3g}{nans}) and flips "
        f"{plural(effect.flips, 'pixel')} {cutoff_text}"
    )


def _size_text(effect: Effect) -> str:
    """The figure an advice rests on: ULPs, or NaNs where no ULP distance exists."""
    if effect.nan_mismatches and not effect.max_ulp:
        return plural(effect.nan_mismatches, "value") + " NaN in one map only"
    return f"{effect.max_ulp:,} ULP"


def _first_repeats(study: GroupAnalysis) -> dict[str, StudyRun]:
    """Each configuration's first repeat, of the reference's model: an artefact's runs
    beside its source are another model, said apart (``artefact_findings``)."""
    firsts: dict[str, StudyRun] = {}
    for run in sorted(study.runs, key=lambda r: r.repeat):
        if run.artefact == study.reference.artefact:
            firsts.setdefault(study.configuration_of(run), run)
    return firsts


def _repeatability(study: GroupAnalysis) -> list[Finding]:
    if not study.verdicts:
        return [
            Finding(
                "not measured",
                "Repeatability was not measured: every configuration ran once. Run each "
                "configuration at least twice (repeats: 2 or more) to see whether the next run "
                "gives the same map.",
            )
        ]
    findings = []
    repeatable = [name for name, v in study.verdicts.items() if v.deterministic]
    if repeatable:
        counts = sorted({study.verdicts[name].repeats for name in repeatable})
        repeats = " or ".join(map(str, counts))
        which = (
            "Every configuration run more than once gave bitwise-equal maps over its"
            if len(repeatable) == len(study.verdicts)
            else "These configurations gave bitwise-equal maps over their"
        )
        findings.append(
            Finding(
                "repeatability",
                f"{which} {repeats} repeats: {', '.join(repeatable)}.",
                "bitwise equal",
            )
        )
    for name, verdict in study.verdicts.items():
        if not verdict.deterministic:
            findings.append(
                Finding(
                    "repeatability",
                    f"{name} is {verdict.sentence()}.",
                    f"{verdict.max_ulp:,} ULP",
                    DOCS["determinism"],
                )
            )
    return findings + _across_processes(study)


def _across_processes(study: GroupAnalysis) -> list[Finding]:
    """What repeats in fresh processes add to repeats in one: a fresh process autotunes
    again and may choose other kernels, which repeats in one process never show."""
    firsts = _first_repeats(study)
    by_identity = {(run.config, run.machine): name for name, run in firsts.items()}
    findings = []
    for fresh_name, fresh in firsts.items():
        if not fresh.config.fresh_repeats or fresh_name not in study.verdicts:
            continue
        within_name = by_identity.get(
            (replace(fresh.config, repeat_scope="process"), fresh.machine)
        )
        within = study.verdicts.get(within_name or "")
        across = study.verdicts[fresh_name]
        if within is None or not within.deterministic:
            continue  # nothing to add to what the in-process repeats said
        if across.deterministic:
            sentence = (
                f"{within_name} is repeatable within a process ({within.repeats} repeats) and "
                f"across fresh processes ({fresh_name}, {across.repeats} processes)."
            )
        else:
            sentence = (
                f"{within_name} is repeatable within a process ({within.repeats} repeats) but "
                f"differs across processes ({fresh_name}: up to {across.max_ulp:,} ULP over "
                f"{across.repeats} fresh processes): each new process chooses its kernels "
                "again (autotuning), so a rerun of the program gives another map."
            )
        findings.append(
            Finding("repeatability", sentence, f"{across.max_ulp:,} ULP", DOCS["repeat_scope"])
        )
    return findings


def _link(knob: str, config: RunConfig) -> str:
    """Where the setting is documented: a runtime's own page (LiteRT's quantization, ONNX
    Runtime's threading), else the knob's."""
    return RUNTIMES[config.runtime].link if knob == "runtime" else DOCS[knob]


def _knob_effects(
    study: GroupAnalysis, cutoff_text: str
) -> tuple[list[Finding], dict[str, Effect], set[str], list[Conversion]]:
    """A sentence per configuration that differs from the reference in exactly one knob (a
    clean measurement of that knob), and a pointer to ``explain`` for the mixed ones. A
    conversion (the Keras model's runtime to LiteRT or ONNX Runtime) is kept apart: advice
    on it is not to keep the runtime but to measure what ships."""
    reference = study.reference
    findings: list[Finding] = []
    alone: dict[str, Effect] = {}
    conversions: list[Conversion] = []
    varied: set[str] = set()
    order = [knob.name for knob, _ in KNOB_GROUPS]

    def knob_order(item: tuple[str, StudyRun]) -> tuple[int, int, str]:
        steps = plan_attribution(reference.config, item[1].config).steps
        first = order.index(steps[0].knob) if steps else -1
        return (len(steps), first, item[0])

    for name, run in sorted(_first_repeats(study).items(), key=knob_order):
        if name == study.configuration_of(reference):
            continue
        steps = plan_attribution(reference.config, run.config).steps
        effect = study.effect(run)
        elsewhere = study.configuration_of(run) != run.configuration or not steps
        if elsewhere:
            # Another machine: its knobs and its hardware/libraries are confounded.
            knobs = f" and in {', '.join(s.knob for s in steps)}" if steps else ""
            findings.append(
                Finding(
                    "knobs",
                    f"{name} was computed on another machine{knobs}; it "
                    f"{_effect_text(effect, cutoff_text)}. The machine (CPU, GPU, libraries) "
                    "is part of that difference.",
                    _size_text(effect),
                )
            )
            continue
        varied.update(step.knob for step in steps)
        if len(steps) == 1:
            step = steps[0]
            if step.knob == "runtime" and is_conversion(
                reference.config.runtime, run.config.runtime
            ):
                conversions.append(Conversion(run.config.runtime, name, effect))
            else:
                earlier = alone.get(step.knob)
                alone[step.knob] = Effect.largest([earlier, effect]) if earlier else effect
            findings.append(
                Finding(
                    "knobs",
                    f"Changing {_KNOB_NAMES[step.knob]} alone ({step.change}, {name} against "
                    f"{reference.label}) {_effect_text(effect, cutoff_text)}.",
                    f"{_size_text(effect)}, {plural(effect.flips, 'flip')}",
                    _link(step.knob, run.config),
                )
            )
        else:
            knobs = ", ".join(step.knob for step in steps)
            findings.append(
                Finding(
                    "knobs",
                    f"{name} changes {len(steps)} knobs at once ({knobs}) and "
                    f"{_effect_text(effect, cutoff_text)}; explaining the difference knob by "
                    "knob (explain) separates them.",
                    _size_text(effect),
                )
            )
    return findings, alone, varied, conversions


def _advice(study: GroupAnalysis, alone: dict[str, Effect], cutoff_text: str) -> list[Finding]:
    advice = []
    reference = study.reference
    changing = {knob: e for knob, e in alone.items() if e.differing_pixels}
    same_as_reference = {knob.name for knob, _ in KNOB_GROUPS if knob.advise_keeping}
    order = [knob.name for knob, _ in KNOB_GROUPS]
    for knob in sorted(changing.keys() & same_as_reference, key=order.index):
        value = KNOBS[knob].setting_text(getattr(reference.config, knob))
        advice.append(
            Finding(
                "advice",
                f"Keep {value}, as in the reference, wherever maps are compared: "
                f"{_KNOB_NAMES[knob]} alone moved the map by up to {_size_text(changing[knob])} "
                "here.",
                _size_text(changing[knob]),
                DOCS[knob],
            )
        )
    # Repeats that differ in value (not just in the sign of a zero or a NaN's payload).
    varying = {n: v for n, v in study.verdicts.items() if v.varying_pixels}
    if varying:
        name, verdict = max(varying.items(), key=lambda item: item[1].max_ulp)
        firsts = _first_repeats(study)
        device = firsts[name].config.device
        repeatable = [
            n
            for n, v in study.verdicts.items()
            if not v.varying_pixels
            and firsts[n].config.determinism
            and firsts[n].config.device == device
            and firsts[n].machine == firsts[name].machine
        ]
        backed = (
            f"; with it on, {', '.join(repeatable)} was repeatable here"
            if repeatable
            else "; no run with it on was measured here (add determinism=on to check it helps)"
        )
        advice.append(
            Finding(
                "advice",
                f"Turn on op determinism (tf.config.experimental.enable_op_determinism) for "
                f"repeatable runs: {name} varied by up to {verdict.max_ulp:,} ULP between "
                f"repeats{backed}.",
                f"{verdict.max_ulp:,} ULP",
                DOCS["determinism"],
            )
        )
    gpu_runs = _first_repeats(study)
    tf32_pairs = [
        (run, other)
        for run in gpu_runs.values()
        for other in gpu_runs.values()
        if run.config.is_gpu
        and run.config.tf32
        and run.machine == other.machine == reference.machine
        and single_knob(run.config, other.config) == "tf32"
    ]
    if tf32_pairs and not reference.config.is_gpu:
        on, off = tf32_pairs[0]
        e_on, e_off = study.effect(on), study.effect(off)
        closer = e_off.max_abs < e_on.max_abs
        advice.append(
            Finding(
                "advice",
                f"TF32 off {'brings' if closer else 'does not bring'} {on.config.device} closer "
                f"to the CPU's float32: max |Δ| against {reference.label} is "
                f"{e_off.max_abs:.3g} with TF32 off and {e_on.max_abs:.3g} with it on.",
                f"{e_off.max_abs:.3g} vs {e_on.max_abs:.3g}",
                DOCS["tf32"],
            )
        )
    at_risk = int(study.at_risk.sum())
    if at_risk and not study.multiclass:
        best, count = quietest_cutoff(reference.probabilities, study.margin, study.cutoff)
        elsewhere = (
            f"; of the cutoffs within ±0.1, {format_float32(best)} has the fewest ({count:,})"
            if count < at_risk
            else "; no cutoff within ±0.1 has fewer"
        )
        advice.append(
            Finding(
                "advice",
                f"Treat the {plural(at_risk, 'at-risk pixel')} as uncertain, or choose a "
                f"cutoff away from dense regions of the map: {cutoff_text}, "
                f"{plural(at_risk, 'pixel')} {verb(at_risk, 'lies', 'lie')} within "
                f"{study.margin:.3g} of it{elsewhere}.",
                f"{at_risk:,} at risk",
            )
        )
    elif at_risk:
        advice.append(
            Finding(
                "advice",
                f"Treat the {plural(at_risk, 'at-risk pixel')} as uncertain: their two most "
                f"likely classes are within 2 × {study.margin:.3g} of each other.",
                f"{at_risk:,} at risk",
            )
        )
    identical = all(c.bitwise_equal for c in study.comparisons.values())
    if not advice and study.others and identical:
        advice.append(
            Finding(
                "advice",
                f"Every run is bitwise equal to {reference.label}: nothing to avoid among the "
                "configurations measured.",
                "0 ULP",
            )
        )
    return advice


def diagnose(study: GroupAnalysis) -> list[Finding]:
    """The findings for ``study``, in the order a person asks: is it normal (repeatability),
    why (knobs), what it does at the cutoff, how to avoid it, and what was not measured."""
    cutoff_text = at_cutoff(study.cutoff, study.multiclass)
    findings = _repeatability(study)
    knob_findings, alone, varied, conversions = _knob_effects(study, cutoff_text)
    findings += knob_findings
    findings += artefact_findings(study, cutoff_text)
    findings += cutoff_findings(study, cutoff_text)
    findings += exact_findings(study)
    findings += deployment_advice(conversions, cutoff_text)
    findings += _advice(study, alone, cutoff_text)
    findings += emulation_findings(study, _first_repeats(study), cutoff_text)
    findings += remedy_findings(study, _first_repeats(study), alone)
    findings += exact_missing(study)
    if not any(run.config.is_gpu for run in study.runs):
        findings.append(emulation_missing(study))
    unmeasured = [knob.name for knob, _ in KNOB_GROUPS if knob.name not in varied]
    if unmeasured and study.others:
        names = ", ".join(_KNOB_NAMES[k] for k in unmeasured)
        findings.append(
            Finding("not measured", f"Not varied in these runs, so not measured: {names}.")
        )
    return findings


def by_topic(findings: list[Finding]) -> list[tuple[str, list[Finding]]]:
    """(heading, findings) for every topic that has findings, in :data:`TOPICS` order."""
    grouped = [(title, [f for f in findings if f.topic == t]) for t, title in TOPICS.items()]
    return [(title, chosen) for title, chosen in grouped if chosen]
