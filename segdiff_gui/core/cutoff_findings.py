"""What a diagnosis says happens at the cutoff: the pixels that change class, those at risk,
ties of a multi-class map, and the quietest cutoff nearby (core/diagnosis.py asks)."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.findings import Finding, plural, verb
from segdiff_gui.core.spread import at_risk_mask
from segdiff_gui.core.study import GroupAnalysis

__all__ = ["cutoff_findings", "quietest_cutoff"]


def quietest_cutoff(reference: np.ndarray, margin: float, cutoff: float) -> tuple[float, int]:
    """Among cutoffs within ±0.1 of ``cutoff`` (steps of 0.01), the one with the fewest
    at-risk pixels, and that count. Only cutoffs that leave pixels in both classes count: one
    above every value of the map has no pixel at risk because it has no foreground."""
    candidates = np.round(np.arange(-0.1, 0.1001, 0.01) + cutoff, 2)
    low, high = float(np.nanmin(reference)), float(np.nanmax(reference))
    candidates = candidates[(candidates > 0) & (candidates < 1)]
    candidates = candidates[(candidates > low) & (candidates <= high)]
    if not len(candidates):
        return cutoff, int(at_risk_mask(reference, margin, cutoff).sum())
    counts = [int(at_risk_mask(reference, margin, float(c)).sum()) for c in candidates]
    best = int(np.argmin(counts))
    return float(candidates[best]), counts[best]


def _tie_findings(study: GroupAnalysis) -> list[Finding]:
    """Pixels whose top classes are exactly equal in a run: argmax's lowest class is no class
    decision, and they are said apart from the flips."""
    tied = [(run, study.comparisons[run.key].ties) for run in study.others]
    tied = [(run, count) for run, count in tied if count]
    if not tied:
        return []
    run, count = max(tied, key=lambda pair: pair[1])
    return [
        Finding(
            "cutoff",
            f"{plural(count, 'pixel')} of {run.label} (against {study.reference.label}) "
            f"{verb(count, 'has', 'have')} "
            "their most likely classes exactly equal in one of the two maps (a low-precision "
            "map can round them to one value): argmax gives such a pixel the lowest class, which "
            "is no class decision, so they are counted as ties, not flips.",
            f"{count:,} tied",
        )
    ]


def cutoff_findings(study: GroupAnalysis, cutoff_text: str) -> list[Finding]:
    flipped = int(study.any_flips().sum())
    at_risk = int(study.at_risk.sum())
    if not study.others or (flipped == 0 and at_risk == 0):
        return _tie_findings(study) if study.others else []
    worst = max(study.others, key=lambda run: int(study.flips(run).sum()))
    worst_count = int(study.flips(worst).sum())
    most = f" (most in {worst.label}: {worst_count:,})" if worst_count else ""
    return [
        *_tie_findings(study),
        Finding(
            "cutoff",
            f"{cutoff_text.capitalize()}, {plural(flipped, 'pixel')} "
            f"{verb(flipped, 'changes', 'change')} class in at least one run{most}; "
            f"{plural(at_risk, 'pixel')} {verb(at_risk, 'is', 'are')} at risk: the largest "
            "observed "
            f"difference ({study.margin:.3g}) could move them across.",
            f"{flipped:,} flips, {at_risk:,} at risk",
        ),
    ]
