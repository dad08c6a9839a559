"""What a diagnosis says against the exact (float64) map: each run's error, which side of
each flip is right, and which run is wrong where float32 could have decided (core/exact.py
measures; core/diagnosis.py asks)."""

from __future__ import annotations

from dataclasses import replace

from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.exact import FlipSides, undecidable_words
from segdiff_gui.core.findings import Finding, plural, verb
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtimes import EXACT_PRECISION
from segdiff_gui.core.study import GroupAnalysis

__all__ = ["exact_findings", "exact_missing", "flip_sides_named"]


def flip_sides_named(study: GroupAnalysis) -> list[FlipSides]:
    """Which side of each run's flips is right, a configuration's repeats that agree bit for
    bit said once, named together."""
    sides = study.flip_sides
    return [
        replace(sides[run.key], second=label)
        for label, run in study.repeats_named_together(study.others)
    ]


def exact_missing(study: GroupAnalysis) -> list[Finding]:
    """Said where runs flip and no exact run was measured: which side of the flips is right is
    then unknown, and the exact run that would say it, where the reference's configuration can
    be computed in float64 (else the plain one on its device)."""
    if study.exact is not None:
        return []
    flips = sum(study.flip_count(run) for run in study.others)
    if not flips:
        return []
    reference = study.reference.config
    try:
        exact = replace(reference, precision=EXACT_PRECISION, keep_float32=(), emulate="off")
        exact = replace(exact, tf32=True)
    except ConfigError:
        exact = RunConfig(device=reference.device, precision=EXACT_PRECISION)
    spec = KNOBS.changed_spec(exact)
    return [
        Finding(
            "not measured",
            f"Which side of the {plural(flips, 'flip')} is right was not measured: the runs "
            f"say how far apart they are, not which is nearer the exact answer. Run {spec} (the "
            "model in float64) to know.",
            measure=(spec,),
        )
    ]


def exact_findings(study: GroupAnalysis) -> list[Finding]:
    """The ``exact`` topic: nothing without an exact run, or without runs to measure."""
    errors = study.exact_errors
    if not errors:
        return []
    cutoff_text = at_cutoff(study.cutoff, study.multiclass)
    runs = [study.reference, *study.others]
    # A configuration's repeats that agree bit for bit are said once, named together.
    named = study.repeats_named_together(runs)
    errors = {run.key: replace(errors[run.key], label=label) for label, run in named}
    runs = [run for _, run in named]
    findings = [
        Finding(
            "exact",
            errors[run.key].sentence(study.multiclass),
            f"{errors[run.key].max_ulp:,} ULP, {errors[run.key].wrong:,} wrong",
        )
        for run in runs
    ]
    findings += [
        Finding("exact", sides.sentence(), f"{sides.first_right:,} : {sides.second_right:,}")
        for sides in flip_sides_named(study)
        if sides.flips
    ]
    wrong = [errors[run.key] for run in runs if errors[run.key].decided_wrong]
    undecided = sum(errors[run.key].undecidable for run in runs)
    if not wrong:
        if undecided:
            who = "Neither is" if len(runs) == 2 else "None of the runs is"
            findings.append(
                Finding(
                    "exact",
                    f"{who} wrong: wherever a run's class differs from the exact map's "
                    f"{cutoff_text} ({plural(undecided, 'pixel')} over the runs), the pixel "
                    f"{undecidable_words(1, study.multiclass, study.cutoff)}, where float32 "
                    "cannot decide its class: the runs differ there by rounding, not error.",
                    f"{undecided:,} undecidable",
                )
            )
        else:
            findings.append(
                Finding(
                    "exact",
                    f"Every run's classes {cutoff_text} are the exact map's.",
                    "0 wrong",
                )
            )
        return findings
    for error in wrong:
        also = (
            f"; {error.undecidable:,} more "
            f"{undecidable_words(error.undecidable, study.multiclass, study.cutoff)}"
            if error.undecidable
            else ""
        )
        ties = (
            f" or its top classes are tied, no class decided ({error.wrong_tied:,} of them)"
            if error.wrong_tied
            else ""
        )
        findings.append(
            Finding(
                "exact",
                f"{error.label} is wrong at {plural(error.decided_wrong, 'pixel')} {cutoff_text}: "
                f"its class there differs from the exact ({EXACT_PRECISION}) map's{ties}, and "
                f"float32 could have decided {verb(error.decided_wrong, 'it', 'them')}{also}.",
                f"{error.decided_wrong:,} wrong",
            )
        )
    right = [errors[run.key].label for run in runs if not errors[run.key].decided_wrong]
    if right:
        findings.append(
            Finding(
                "exact",
                f"{', '.join(right)} {verb(len(right), 'is', 'are')} right at every pixel "
                "float32 can decide.",
                "0 wrong",
            )
        )
    return findings
