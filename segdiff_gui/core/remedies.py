"""Diagnosis tests the remedies: a knob that moves the map against the reference may move
nothing under another setting (the batch matters with oneDNN on, not with it off). Where the
runs hold that measurement, the remedy is said with its figures; where a cheap one was not
measured, the configurations that would measure it are named (``Finding.measure``: the CLI
prints them, the window offers a link that runs them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.attribution import KNOB_GROUPS, Effect, plan_attribution, single_knob
from segdiff_gui.core.findings import Finding, plural
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.study import GroupAnalysis, StudyRun

__all__ = ["remedy_findings"]

_TITLES = {knob.name: knob.title for knob, _ in KNOB_GROUPS}
# Knobs whose CPU effect oneDNN's kernels may be behind: they reorder the sums per batch,
# per thread count and inside fused ops.
_ONEDNN_SENSITIVE = ("batch", "threads", "xla")


def _size(differing: int, max_ulp: int, flips: int) -> str:
    return f"{plural(differing, 'pixel')} by up to {max_ulp:,} ULP, {plural(flips, 'flip')}"


def _value(run: StudyRun, knob: str) -> str:
    return KNOBS[knob].setting_text(getattr(run.config, knob))


def _measured(
    study: GroupAnalysis, firsts: Mapping[str, StudyRun], knob: str, effect: Effect
) -> list[Finding]:
    """What ``knob``'s change does under every other single setting measured beside it."""
    reference = study.reference
    findings = []
    for a in firsts.values():
        other = single_knob(reference.config, a.config)
        if other is None or other == knob:
            continue
        for b in firsts.values():
            if single_knob(a.config, b.config) != knob or set(_steps(reference, b)) != {
                other,
                knob,
            }:
                continue
            if getattr(b.config, knob) != _target_value(study, firsts, knob):
                continue
            compared = compare_maps(a.probabilities, b.probabilities, study.cutoff)
            with_setting = _value(a, other)
            before = _size(effect.differing_pixels, effect.max_ulp, effect.flips)
            if compared.bitwise_equal:
                findings.append(
                    Finding(
                        "advice",
                        f"With {with_setting}, {_TITLES[knob]} changes nothing: "
                        f"{b.configuration} equals {a.configuration} bit for bit, while with "
                        f"{_value(reference, other)}, as in the reference, it moved {before}. "
                        f"Set {with_setting} ({KNOBS.changed_spec(a.config)}) where maps "
                        "must not depend on it.",
                        f"0 vs {effect.max_ulp:,} ULP",
                        KNOBS[other].link,
                    )
                )
            else:
                findings.append(
                    Finding(
                        "knobs",
                        f"With {with_setting}, {_TITLES[knob]} still moves the map: "
                        f"{b.configuration} against {a.configuration} differs in "
                        f"{_size(compared.differing_pixels, compared.max_ulp, compared.flips)} "
                        f"(with {_value(reference, other)}, as in the reference: {before}).",
                        f"{compared.max_ulp:,} vs {effect.max_ulp:,} ULP",
                    )
                )
    return findings


def _steps(base: StudyRun, other: StudyRun) -> list[str]:
    return [step.knob for step in plan_attribution(base.config, other.config).steps]


def _target_value(study: GroupAnalysis, firsts: Mapping[str, StudyRun], knob: str) -> object:
    """The value of ``knob`` its single-knob run against the reference has."""
    reference = study.reference
    for run in firsts.values():
        if single_knob(reference.config, run.config) == knob:
            return getattr(run.config, knob)
    return None


def _onednn_unmeasured(study: GroupAnalysis, knob: str, effect: Effect) -> Finding | None:
    """Whether oneDNN off would remove ``knob``'s effect, where the reference ran with it on
    (TensorFlow on the CPU) and no run says: the two configurations that measure it."""
    reference = study.reference
    config = reference.config
    tensorflow_kernels = RUNTIMES[config.runtime].tensorflow_kernels  # Keras 3's or Keras 2's
    if not tensorflow_kernels or config.is_gpu or knob not in _ONEDNN_SENSITIVE:
        return None
    if not (config.onednn is True or (config.onednn is None and reference.onednn is True)):
        return None
    changed = next(
        (
            run
            for run in study.runs
            if single_knob(reference.config, run.config) == knob and not run.imported
        ),
        None,
    )
    if changed is None:
        return None
    specs = (
        KNOBS.changed_spec(replace(config, onednn=False)),
        KNOBS.changed_spec(replace(changed.config, onednn=False)),
    )
    return Finding(
        "not measured",
        f"Whether oneDNN off removes {_TITLES[knob]}'s effect ({effect.max_ulp:,} ULP with "
        f"oneDNN on) was not measured: run {specs[0]} and {specs[1]} to see.",
        measure=specs,
    )


def remedy_findings(
    study: GroupAnalysis, firsts: Mapping[str, StudyRun], alone: Mapping[str, Effect]
) -> list[Finding]:
    """For every knob that moved the map on its own: what it does under the other settings
    measured beside it, or the cheap remedy not measured yet."""
    findings: list[Finding] = []
    local = {
        name: run
        for name, run in firsts.items()
        if run.machine == study.reference.machine and not run.imported and not run.merged_from
    }
    for knob, effect in alone.items():
        if not effect.differing_pixels:
            continue
        measured = _measured(study, local, knob, effect)
        findings += measured
        onednn_measured = any("onednn" in _steps(study.reference, r) for r in local.values())
        if (
            not onednn_measured
            and not any(f.topic == "advice" for f in measured)
            and (suggestion := _onednn_unmeasured(study, knob, effect))
        ):
            findings.append(suggestion)
    return findings
