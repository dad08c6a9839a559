"""Which knob makes the difference: one knob at a time, and the cumulative path to a target.

Given a base configuration (say ``cpu b1``) and a target (``gpu:0 b64 xla``), the knobs that
differ are changed one at a time from the base (*alone*) and one after another along a fixed
path from the base to the target (*cumulative*). Each change is measured as a comparison of two
maps: largest ULP distance, differing pixels, class flips at the cutoff, and the pixels of the
earlier map that lie within that change's largest difference of the cutoff (*at risk*). Repeats
of one configuration are measured the same way against its first repeat, so nondeterminism is a
line of its own and never mistaken for a knob's effect.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import MapComparison, compare_maps, is_multiclass
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.findings import plural
from segdiff_gui.core.knobs import KNOBS, Knob, KnobRegistry
from segdiff_gui.core.spread import at_risk_mask

__all__ = [
    "KNOB_GROUPS",
    "Attribution",
    "AttributionPlan",
    "AttributionStep",
    "Effect",
    "attribute",
    "plan_attribution",
    "single_knob",
]

# The knobs in the order of the cumulative path, each with the fields it carries.
# What an "alone" row compares with when the runtime refuses that configuration.
REFUSED = "refused"

KNOB_GROUPS: tuple[tuple[Knob, tuple[str, ...]], ...] = KNOBS.groups()


def _value_text(config: RunConfig, field: str, knobs: KnobRegistry) -> str:
    return knobs.shown(field, getattr(config, field))


def _take(config: RunConfig, source: RunConfig, fields: tuple[str, ...]) -> RunConfig | None:
    """``config`` with ``fields`` taken from ``source``; None where that configuration is
    refused (a knob that means nothing under the runtime it would run in)."""
    try:
        return replace(config, **{field: getattr(source, field) for field in fields})
    except ConfigError:
        return None


@dataclass(frozen=True)
class AttributionStep:
    """One knob that differs between base and target.

    ``alone`` is the base with only this knob taken from the target (None where the runtime
    refuses that configuration: JAX with the base's oneDNN off); ``before`` and ``after`` are
    the cumulative path's configurations on either side of this knob.
    """

    knob: str
    change: str
    alone: RunConfig | None
    before: RunConfig
    after: RunConfig


@dataclass(frozen=True)
class AttributionPlan:
    base: RunConfig
    target: RunConfig
    steps: tuple[AttributionStep, ...]

    def configs(self) -> list[RunConfig]:
        """Every configuration the attribution measures, each once, base first."""
        ordered = [self.base]
        for step in self.steps:
            ordered += [config for config in (step.alone, step.after) if config is not None]
        return list(dict.fromkeys(ordered))


def plan_attribution(
    base: RunConfig, target: RunConfig, knobs: KnobRegistry = KNOBS
) -> AttributionPlan:
    """The one-knob and cumulative configurations between ``base`` and ``target``, knob by
    knob in the order of ``knobs``. A knob whose step would give a configuration the runtime
    refuses waits until the knobs it needs have changed (from TensorFlow with oneDNN off to
    JAX: oneDNN first, then the runtime)."""
    pending = []
    for knob_entry, fields in knobs.groups():
        changed = [f for f in fields if getattr(base, f) != getattr(target, f)]
        if changed:
            # The knob names itself; only the batch knob says which of its fields moved.
            change = ", ".join(
                (f"{f} " if len(fields) > 1 else "")
                + f"{_value_text(base, f, knobs)} → {_value_text(target, f, knobs)}"
                for f in changed
            )
            pending.append((knob_entry.name, fields, change))
    steps = []
    current = base
    while pending:
        takeable = [
            (index, after)
            for index, (_, fields, _) in enumerate(pending)
            if (after := _take(current, target, fields)) is not None
        ]
        if not takeable:
            raise ConfigError(
                f"no path from {base.label()} to {target.label()} changes one knob at a time "
                "without a configuration its runtime refuses"
            )
        index, after = takeable[0]
        knob, fields, change = pending.pop(index)
        steps.append(AttributionStep(knob, change, _take(base, target, fields), current, after))
        current = after
    return AttributionPlan(base, target, tuple(steps))


def single_knob(base: RunConfig, target: RunConfig) -> str | None:
    """The knob two configurations differ in, when they differ in exactly one."""
    steps = plan_attribution(base, target).steps
    return steps[0].knob if len(steps) == 1 else None


@dataclass(frozen=True)
class Effect:
    """How one map differs from another (``max_ulp`` over the pixels that are numbers in both)."""

    max_ulp: int
    max_abs: float
    differing_pixels: int
    flips: int
    at_risk: int
    nan_mismatches: int = 0  # values NaN in one map only (no ULP distance covers them)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cells(self) -> list[str]:
        """max ULP, max |Δ|, differing pixels, flips and at-risk pixels, as a table shows them."""
        return [
            f"{self.max_ulp:,}",
            f"{self.max_abs:.3g}",
            f"{self.differing_pixels:,}",
            f"{self.flips:,}",
            f"{self.at_risk:,}",
        ]

    @classmethod
    def between(cls, first: np.ndarray, second: np.ndarray, cutoff: float) -> Effect:
        return cls.of(compare_maps(first, second, cutoff), first)

    @classmethod
    def of(cls, comparison: MapComparison, first: np.ndarray) -> Effect:
        """The effect a comparison already made shows (``first`` is the map it started from)."""
        cutoff = comparison.cutoff
        return cls(
            max_ulp=comparison.max_ulp,
            max_abs=comparison.max_abs,
            differing_pixels=comparison.differing_pixels,
            flips=comparison.flips,
            at_risk=int(at_risk_mask(first, comparison.max_abs, cutoff).sum()),
            nan_mismatches=comparison.nan_mismatches,
        )

    @classmethod
    def largest(cls, effects: Sequence[Effect]) -> Effect:
        """Each figure's largest value over ``effects`` (for the repeats of a configuration)."""
        return cls(
            max_ulp=max(e.max_ulp for e in effects),
            max_abs=max(e.max_abs for e in effects),
            differing_pixels=max(e.differing_pixels for e in effects),
            flips=max(e.flips for e in effects),
            at_risk=max(e.at_risk for e in effects),
            nan_mismatches=max(e.nan_mismatches for e in effects),
        )


# The maps of one configuration, repeat 0 first; empty when it was not measured.
MapsOf = Callable[[RunConfig], Sequence[np.ndarray]]


@dataclass(frozen=True)
class AttributionRow:
    """One line of the table: ``kind`` is ``alone``, ``cumulative``, ``total`` or ``repeats``."""

    kind: str
    knob: str
    change: str
    compared: tuple[str, str]
    effect: Effect | None  # None: a configuration was not measured

    @property
    def refused(self) -> bool:
        """A knob alone that the runtime refuses: never measurable, nothing to run."""
        return self.compared[1] == REFUSED

    @property
    def missing(self) -> bool:
        """Not measured yet, though it could be: its configuration has no run."""
        return self.effect is None and not self.refused

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "knob": self.knob,
            "change": self.change,
            "from": self.compared[0],
            "to": self.compared[1],
            "measured": self.effect is not None,
            **(self.effect.to_dict() if self.effect else {}),
        }


@dataclass(frozen=True)
class Attribution:
    plan: AttributionPlan
    cutoff: float
    rows: tuple[AttributionRow, ...]
    multiclass: bool = False  # softmax maps: flips are argmax changes, not a cutoff's

    def of(self, kind: str) -> list[AttributionRow]:
        return [row for row in self.rows if row.kind == kind]

    @property
    def total(self) -> AttributionRow:
        return self.of("total")[0]

    def sentences(self, failed: bool = False, how: str = "") -> list[str]:
        """What the table says, in words: the largest measured contribution, the repeat spread,
        and what was not measured (``failed``: because runs failed, not because none exist;
        ``how``: the front end's way of computing what is missing)."""
        lines = []
        if not self.plan.steps:
            lines.append(
                "The two runs share every knob: what differs between them is the repeat, or the "
                "machine that computed them (see the total)."
            )
        measured = [(row, row.effect) for row in self.of("alone") if row.effect]
        total = next((row.effect for row in self.of("total") if row.effect), None)
        if measured and total is not None and not total.differing_pixels:
            # Nothing to explain: a knob that moves the map alone is undone on the way.
            top, effect = max(measured, key=lambda p: (p[1].max_ulp, p[1].differing_pixels))
            undone = (
                f" ({top.knob} alone moves it by up to {effect.max_ulp:,} ULP; the other "
                "knobs' settings undo that)"
                if effect.differing_pixels
                else ""
            )
            lines.append(
                f"The two are bitwise equal in total: no knob explains a difference{undone}."
            )
        elif measured:
            top, effect = max(measured, key=lambda p: (p[1].max_ulp, p[1].differing_pixels))
            if effect.differing_pixels:
                lines.append(
                    f"Largest single knob: {top.knob} ({top.change}) — up to {effect.max_ulp:,} "
                    f"ULP, {plural(effect.differing_pixels, 'differing pixel')}, "
                    f"{plural(effect.flips, 'flip')}."
                )
            else:
                lines.append("No measured knob changes the map on its own.")
        noisy = [row for row in self.of("repeats") if row.effect and row.effect.differing_pixels]
        for row in noisy:
            assert row.effect is not None
            lines.append(
                f"{row.compared[0].removesuffix(' r0')} is nondeterministic: repeats differ by up "
                f"to {row.effect.max_ulp:,} ULP — part of any difference it shows is not the knob."
            )
        if self.of("repeats") and not noisy:
            lines.append("Every configuration run more than once was bitwise repeatable.")
        if not self.of("repeats"):
            lines.append(
                "Repeatability not measured: one run per configuration (repeats: 2 or more)."
            )
        refused = [row for row in self.rows if row.refused]
        if refused:
            knobs = ", ".join(dict.fromkeys(row.knob for row in refused))
            lines.append(
                f"Not measurable alone ({knobs}): with the base's other knobs the target's "
                "runtime refuses that configuration; the cumulative path measures it."
            )
        missing = [row for row in self.rows if row.missing]
        if missing:
            knobs = ", ".join(dict.fromkeys(row.knob for row in missing))
            why = "some runs failed" if failed else f"a configuration has no run yet{how}"
            count = f"{len(missing)} comparison{'' if len(missing) == 1 else 's'}"
            lines.append(f"{count} not measured ({knobs}): {why}.")
        if len(self.plan.steps) > 1:
            lines.append(
                "Cumulative steps are measured along one path; their figures need not add up to "
                "the total."
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.plan.base.label(),
            "target": self.plan.target.label(),
            "base_spec": self.plan.base.to_spec(),
            "target_spec": self.plan.target.to_spec(),
            "cutoff": self.cutoff,
            "rows": [row.to_dict() for row in self.rows],
        }


def attribute(
    plan: AttributionPlan,
    maps_of: MapsOf,
    cutoff: float,
    ends: tuple[np.ndarray, np.ndarray] | None = None,
) -> Attribution:
    """Measure every step of ``plan`` from the maps ``maps_of`` gives (first repeats compared
    with first repeats), plus the spread over repeats of every configuration run more than once.
    ``ends``: the two maps a person chose; the total compares exactly those (two repeats of one
    configuration, or the same configuration from two machines, have no knob between them).
    """

    def effect(first: RunConfig, second: RunConfig) -> Effect | None:
        a, b = maps_of(first), maps_of(second)
        return Effect.between(a[0], b[0], cutoff) if len(a) and len(b) else None

    def row(kind: str, step: AttributionStep, a: RunConfig, b: RunConfig | None) -> AttributionRow:
        if b is None:  # the runtime refuses this knob alone: not measurable
            return AttributionRow(kind, step.knob, step.change, (a.label(), REFUSED), None)
        return AttributionRow(kind, step.knob, step.change, (a.label(), b.label()), effect(a, b))

    rows = [row("alone", step, plan.base, step.alone) for step in plan.steps]
    rows += [row("cumulative", step, step.before, step.after) for step in plan.steps]
    rows.append(
        AttributionRow(
            "total",
            "all",
            f"{len(plan.steps)} knob{'' if len(plan.steps) == 1 else 's'}",
            (plan.base.label(), plan.target.label()),
            Effect.between(*ends, cutoff) if ends is not None else effect(plan.base, plan.target),
        )
    )
    for config in plan.configs():
        maps = maps_of(config)
        if len(maps) < 2:
            continue
        spread = Effect.largest([Effect.between(maps[0], m, cutoff) for m in maps[1:]])
        later = "r1" if len(maps) == 2 else f"r1…r{len(maps) - 1}"
        rows.append(
            AttributionRow(
                "repeats",
                "repeat",
                f"{len(maps)} repeats",
                (f"{config.label()} r0", f"{config.label()} {later}"),
                spread,
            )
        )
    base_maps = maps_of(plan.base)
    multiclass = bool(len(base_maps)) and is_multiclass(base_maps[0])
    return Attribution(plan, cutoff, tuple(rows), multiclass)
