"""Precision repair: the layers to keep in float32 so that a reduced precision's
flips at the cutoff disappear (or fall under a bound), and the code that applies them.

The search is Polygraphy's ``debug precision`` idea on Keras layers, in rounds so that each
round's trials run side by side in one engine child (a layer kept in float32 is a run-time
knob, ``keep_float32``, and every trial is a cached run):

1. **Blame.** The layer probe orders the layers by the error each adds: its relative error
   over the previous layer's (the first differing layer first). Layers that add nothing
   (pooling, concatenation) come last.
2. **Prefix.** Keep the k most blamed layers in float32, for k in a bracket: every k when the
   bracket is small, else evenly spread ones, narrowing the bracket round by round to the
   smallest k that passes.
3. **Prune.** From that set, remove what is not needed: every layer alone (one round), then
   the removable ones together, or as many of them as pass, least blamed first; until no
   single layer can go (the set is 1-minimal).

Pure: the search says which sets to try (:meth:`RepairSearch.next_trials`) and is told what
they gave (:meth:`RepairSearch.record`); the runner runs them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.layer_stats import LayerComparison

__all__ = ["RepairResult", "RepairSearch", "Trial", "blame_order", "repair_code"]

_SUFFIX = re.compile(r"(#\d+)?(:\d+)?$")  # a shared layer's second call, a second output
ROUND_TRIALS = 32  # trials per round at most (one child runs them side by side)
MAX_ROUNDS = 12


def layer_of(probe_name: str) -> str:
    """The layer a probe row belongs to: ``dec#2:1`` → ``dec``."""
    return _SUFFIX.sub("", probe_name)


def blame_order(comparison: LayerComparison) -> list[str]:
    """Layers by the error they add, most first: relative error over the previous layer's
    (a layer where the difference is born: infinitely much), in execution order among
    equals. Each layer once (its first row)."""
    scores: dict[str, float] = {}
    order: dict[str, int] = {}
    previous = 0.0
    for index, stats in enumerate(comparison.layers):
        name = layer_of(stats.name)
        error = stats.relative_error if math.isfinite(stats.relative_error) else 1e300
        born = math.inf if error > 0 else 0.0  # no error before: the difference starts here
        added = error / previous if previous > 0 else born
        if name not in scores or added > scores[name]:
            scores[name] = added
        order.setdefault(name, index)
        previous = error
    return sorted(scores, key=lambda name: (-scores[name], order[name]))


@dataclass(frozen=True)
class Trial:
    """One set of layers kept in float32, and what it gave against the reference."""

    kept: tuple[str, ...]
    flips: int | None  # None: the run failed (it passes no bound)
    max_ulp: int = 0
    differing_pixels: int = 0
    label: str = ""

    def passes(self, bound: int) -> bool:
        return self.flips is not None and self.flips <= bound

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trial:
        """What :meth:`to_dict` wrote (TypeError, KeyError or ValueError for anything else)."""
        kept = data["kept"]
        if not isinstance(kept, list) or not all(isinstance(name, str) for name in kept):
            raise TypeError("kept")
        flips = data["flips"]
        return cls(
            tuple(kept),
            None if flips is None else int(flips),
            int(data["max_ulp"]),
            int(data["differing_pixels"]),
            str(data["label"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": list(self.kept),
            "flips": self.flips,
            "max_ulp": self.max_ulp,
            "differing_pixels": self.differing_pixels,
            "label": self.label,
        }


def _spread(low: int, high: int, most: int) -> list[int]:
    """Up to ``most`` whole numbers in ``(low, high]``, evenly spread, ``high`` included."""
    count = high - low
    if count <= most:
        return list(range(low + 1, high + 1))
    return sorted({low + math.ceil(count * (i + 1) / most) for i in range(most)})


@dataclass
class RepairSearch:
    """The search over ``order`` (most blamed first) for a set within ``bound`` flips."""

    order: Sequence[str]
    bound: int = 0
    round_trials: int = ROUND_TRIALS
    trials: dict[tuple[str, ...], Trial] = field(default_factory=dict)
    phase: str = "prefix"
    rounds: int = 0
    # prefix: sizes known to fail (at most low) and to pass (high; None: none yet)
    low: int = 0
    high: int | None = None
    kept: tuple[str, ...] = ()
    _removable: list[str] = field(default_factory=list)

    def _prefix(self, size: int) -> tuple[str, ...]:
        return tuple(sorted(self.order[:size]))

    @property
    def done(self) -> bool:
        return self.phase in ("done", "failed")

    def next_trials(self) -> list[tuple[str, ...]]:
        """The sets to try next (none once the search is done)."""
        while not self.done:
            trials = self._next()
            wanted = [t for t in trials if t not in self.trials]
            if wanted:
                return wanted
            if trials:  # all known already (cached): take them as this round's results
                self.record([])
            if self.rounds >= MAX_ROUNDS and not self.done:
                self.phase = "done"
        return []

    def _next(self) -> list[tuple[str, ...]]:
        if self.phase == "prefix":
            top = len(self.order) if self.high is None else self.high - 1
            if self.high is not None and self.high == self.low + 1 or top <= self.low:
                if self.high is None:
                    self.phase = "failed"
                    return []
                self.kept = self._prefix(self.high)
                self.phase = "prune"
                return self._next()
            ends = _spread(self.low, top, self.round_trials)
            return [self._prefix(size) for size in ends]
        if self.phase == "prune":
            return [tuple(n for n in self.kept if n != name) for name in self.kept]
        if self.phase == "together":
            return [self._without(self._removable[:j]) for j in range(1, len(self._removable) + 1)]
        return []

    def _without(self, names: Sequence[str]) -> tuple[str, ...]:
        gone = set(names)
        return tuple(n for n in self.kept if n not in gone)

    def _rank(self, name: str) -> int:
        return list(self.order).index(name)

    def record(self, results: Sequence[Trial]) -> None:
        """What the last :meth:`next_trials` gave (and any it had already)."""
        for trial in results:
            self.trials[trial.kept] = trial
        self.rounds += 1
        if self.phase == "prefix":
            sizes = range(1, len(self.order) + 1)
            tried = {size: self.trials.get(self._prefix(size)) for size in sizes}
            passing = [s for s, t in tried.items() if t is not None and t.passes(self.bound)]
            if passing:
                self.high = min(passing)
            failing = [
                s
                for s, t in tried.items()
                if t is not None
                and not t.passes(self.bound)
                and (self.high is None or s < self.high)
            ]
            self.low = max([self.low, *failing])
        elif self.phase == "prune":
            removable = [
                name
                for name in self.kept
                if (t := self.trials.get(self._without([name]))) is not None
                and t.passes(self.bound)
            ]
            if not removable:
                self.phase = "done"
                return
            # The least blamed first: they are the likeliest to be needed least.
            self._removable = sorted(removable, key=self._rank, reverse=True)
            self.phase = "together"
        elif self.phase == "together":
            best = 0
            for j in range(1, len(self._removable) + 1):
                together = self.trials.get(self._without(self._removable[:j]))
                if together is not None and together.passes(self.bound):
                    best = j
            self.kept = self._without(self._removable[: max(best, 1)])
            self.phase = "prune"

    def best(self) -> Trial | None:
        """The passing trial of the fewest layers kept (the search's answer)."""
        if self.phase == "failed":
            return None
        found = self.trials.get(tuple(sorted(self.kept)))
        passing = [t for t in self.trials.values() if t.passes(self.bound)]
        if found is not None and found.passes(self.bound):
            return found
        return min(passing, key=lambda t: len(t.kept), default=None)


@dataclass(frozen=True)
class RepairResult:
    """What the repair found: the layers, and the flips and ULPs before and after."""

    precision: str
    reference_label: str
    before: Trial
    after: Trial | None  # None: no set within the bound (even all layers in float32)
    bound: int
    cutoff: float
    trials: tuple[Trial, ...]
    rounds: int
    order: tuple[str, ...]

    @property
    def kept(self) -> tuple[str, ...]:
        return self.after.kept if self.after else ()

    def sentences(self) -> list[str]:
        before = self.before
        what = f"{before.flips:,} flips" if before.flips is not None else "a failed run"
        if self.after is None:
            return [
                f"No set of layers kept in float32 brought {self.precision}'s {what} to "
                f"{self.bound} or fewer against {self.reference_label} "
                f"({len(self.trials)} trials)."
            ]
        if not self.after.kept:
            return [
                f"{self.precision} flips {before.flips:,} pixels against "
                f"{self.reference_label}: within the bound of {self.bound}; nothing to repair."
            ]
        after = self.after
        lines = [
            f"Keeping {len(after.kept)} of {len(self.order)} layers in float32 "
            f"({', '.join(after.kept)}) brings {self.precision}'s flips against "
            f"{self.reference_label} from {before.flips:,} to {after.flips:,} "
            f"(max ULP {before.max_ulp:,} → {after.max_ulp:,}); {len(self.trials)} trials "
            f"in {self.rounds} rounds, each a cached run."
        ]
        if len(after.kept) == len(self.order):
            lines.append(
                f"That is every layer: on this image {self.precision} flips pixels at cutoff "
                f"{format_float32(self.cutoff)} unless the whole model computes in float32."
            )
        fewer = self.fewest_flips(below=len(after.kept))
        if fewer:
            shown = "; ".join(
                f"{size} layer{'' if size == 1 else 's'}: {flips:,} flip{'' if flips == 1 else 's'}"
                for size, flips in fewer[:3]
            )
            lines.append(f"Allowing a few flips keeps fewer layers (the fewest seen: {shown}).")
        return lines

    def fewest_flips(self, below: int) -> list[tuple[int, int]]:
        """The fewest flips a trial of each size under ``below`` layers gave, largest first."""
        best: dict[int, int] = {}
        for trial in self.trials:
            size = len(trial.kept)
            if 0 < size < below and trial.flips is not None:
                best[size] = min(best.get(size, trial.flips), trial.flips)
        return sorted(best.items(), reverse=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepairResult:
        """What :meth:`to_dict` wrote (TypeError, KeyError or ValueError for anything else)."""
        after = data["after"]
        return cls(
            precision=str(data["precision"]),
            reference_label=str(data["reference"]),
            before=Trial.from_dict(data["before"]),
            after=None if after is None else Trial.from_dict(after),
            bound=int(data["bound"]),
            cutoff=float(data["cutoff"]),
            trials=tuple(Trial.from_dict(t) for t in data["trials"]),
            rounds=int(data["rounds"]),
            order=tuple(str(name) for name in data["blame_order"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "reference": self.reference_label,
            "cutoff": self.cutoff,
            "bound": self.bound,
            "keep_float32": list(self.kept),
            "before": self.before.to_dict(),
            "after": self.after.to_dict() if self.after else None,
            "trials": [t.to_dict() for t in self.trials],
            "rounds": self.rounds,
            "blame_order": list(self.order),
        }


def repair_code(model_file: str, precision: str, kept: Sequence[str]) -> str:
    """Keras code that rebuilds the user's model with ``kept`` in float32 and the rest under
    ``precision``: the very steps segdiff's engine takes (``engine/models.py``)."""
    names = ",\n".join(f"    {name!r}" for name in kept)
    return f'''import keras

KEEP_FLOAT32 = {{
{names},
}}
POLICY = {precision!r}


def layer_paths(model, prefix=""):
    """Each layer's name as segdiff gives it: nested models as "encoder/conv"."""
    for layer in model.layers:
        yield id(layer), prefix + layer.name
        if isinstance(layer, keras.Model):
            yield from layer_paths(layer, prefix + layer.name + "/")


original = keras.models.load_model({model_file!r}, compile=False)
path_of = dict(layer_paths(original))


def with_policy(layer):
    config = layer.get_config()
    config["dtype"] = "float32" if path_of.get(id(layer)) in KEEP_FLOAT32 else POLICY
    return layer.__class__.from_config(config)


model = keras.models.clone_model(original, clone_function=with_policy, recursive=True)
model.set_weights(original.get_weights())
'''
