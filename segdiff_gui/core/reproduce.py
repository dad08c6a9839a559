"""Which configuration reproduces the user's own map (``segdiff reproduce``): the candidates,
searched one knob at a time from the defaults and then in pairs, and the answer in one
sentence. Pure: the runner runs the candidates (runner/reproduce.py) and hands their maps here.

What is varied is what moves a map on a CPU without the user noticing: oneDNN (TensorFlow's
default depends on the CPU), the batch the target was inferred in (``model.predict``'s batches
of 32 of the images, in their order), XLA, the intra-op thread count, and the preprocessing's
arithmetic (dividing by 255 or multiplying by float32(1/255)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.floatfmt import fraction_text
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtime_defaults import DefaultsInEffect

__all__ = [
    "Candidate",
    "KERAS_PREDICT_BATCH",
    "Reproduction",
    "Trial",
    "other_arithmetic",
    "predict_batch",
    "search_stages",
]

# model.predict's default batch_size: the target's batch is its block of 32 of the images.
KERAS_PREDICT_BATCH = 32
_NOT_VARIED = (
    "the call (model.predict, model(x) or predict_on_batch)",
    "the runtime's version and build",
    "preprocessing beyond the arithmetic (resizing, colour, normalisation)",
)


@dataclass(frozen=True)
class Candidate:
    """A configuration and preprocessing to try, and what it changes from the defaults."""

    config: RunConfig
    preprocessing: Preprocessing
    changes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return " + ".join(self.changes) or "the defaults"

    def spec(self) -> str:
        """The ``--config`` of its configuration: the knobs it sets (``batch=1`` for none,
        so that a run of it is this one configuration, not the default matrix)."""
        return KNOBS.changed_spec(self.config)

    def scaling(self, base: Preprocessing) -> dict[str, str]:
        """Its arithmetic where it is not ``base``'s, as ``--divide``/``--scale`` text:
        ``{"scale": "1/255"}``; ``{}`` when it keeps the base's."""
        if self.preprocessing == base:
            return {}
        if self.preprocessing.divisor is not None:
            return {"divide": fraction_text(self.preprocessing.divisor)}
        if self.preprocessing.scale is not None:
            return {"scale": fraction_text(self.preprocessing.scale)}
        return {}


@dataclass(frozen=True)
class Trial:
    """A candidate's run against the user's map."""

    candidate: Candidate
    key: str
    label: str
    differing: int
    max_ulp: int
    pixels: int

    @property
    def equal(self) -> bool:
        return self.differing == 0

    @classmethod
    def of(cls, candidate: Candidate, key: str, label: str, user: np.ndarray,
           theirs: np.ndarray) -> Trial:  # fmt: skip
        compared = compare_maps(user, theirs)
        return cls(candidate, key, label, compared.differing_pixels, compared.max_ulp,
                   compared.pixels)  # fmt: skip


def other_arithmetic(
    preprocessing: Preprocessing, dtype_max: float | None
) -> tuple[Preprocessing, str] | None:
    """The same scaling with the other arithmetic (dividing ↔ multiplying by the
    reciprocal), and its words; ``None`` where there is no scaling to vary (a float image
    left as it is). ``dtype_max``: what the image's dtype divides by (255, 65535)."""
    if preprocessing.function is not None:
        return None  # your own function's arithmetic is yours
    if preprocessing.divisor is not None:
        other = replace(preprocessing, divisor=None, scale=1.0 / preprocessing.divisor)
        return other, f"x * float32(1/{preprocessing.divisor:g})"
    if preprocessing.scale is not None:
        other = replace(preprocessing, scale=None, divisor=1.0 / preprocessing.scale)
        return other, f"x / {1.0 / preprocessing.scale:g}"
    if dtype_max is None:
        return None
    if preprocessing.by_dtype == "divide":
        return replace(preprocessing, scale=1.0 / dtype_max), f"x * float32(1/{dtype_max:g})"
    return replace(preprocessing, by_dtype="divide"), f"x / {dtype_max:g}"


def predict_batch(image_count: int, target: int) -> tuple[int, int, int]:
    """The batch ``model.predict(images)`` infers the target in: its size, the target's
    position, and the index of the batch's first image."""
    first = target - target % KERAS_PREDICT_BATCH
    size = min(KERAS_PREDICT_BATCH, image_count - first)
    return size, target - first, first


def search_stages(
    preprocessing: Preprocessing,
    image_count: int,
    target: int,
    in_effect: DefaultsInEffect,
    dtype_max: float | None,
    base: RunConfig | None = None,
) -> list[list[Candidate]]:
    """The candidates, in stages: ``base`` (default: the defaults; ``runtime=jax`` for a JAX
    pipeline); each knob alone from it; each pair of knobs. A stage is run only when the one
    before found no match; a candidate the runtime refuses is left out."""
    start = base or RunConfig()
    size, position, _ = predict_batch(image_count, target)
    wanted: list[tuple[dict[str, Any], Preprocessing, str]] = []
    if in_effect.onednn is not None and start.onednn is None:
        wanted.append(({"onednn": not in_effect.onednn}, preprocessing,
                       f"oneDNN {_on(not in_effect.onednn)}"))  # fmt: skip
    if size > 1 and start.batch == 1:
        wanted.append(({"batch": size, "position": position}, preprocessing,
                       f"batch {size} (model.predict's batch of these images)"))  # fmt: skip
    # XLA the other way from what the start computes with (model.predict's choice, unless
    # set); a runtime where XLA means nothing refuses the candidate.
    xla = bool(in_effect.applied(start).xla)
    wanted.append(({"xla": not xla}, preprocessing, f"XLA {_on(not xla)}"))
    if start.threads != 1:
        wanted.append(({"threads": 1}, preprocessing, "1 intra-op thread"))
    if (arithmetic := other_arithmetic(preprocessing, dtype_max)) is not None:
        wanted.append(({}, arithmetic[0], arithmetic[1]))
    singles = [
        candidate
        for changes, chosen, words in wanted
        if (candidate := _candidate(start, changes, chosen, (words,))) is not None
    ]
    pairs = [
        candidate
        for (one, first, said), (two, second, told) in combinations(wanted, 2)
        if (
            candidate := _candidate(
                start, {**one, **two}, first if first != preprocessing else second, (said, told)
            )
        )
        is not None
    ]
    given = () if start == RunConfig() else (f"{KNOBS.changed_spec(start)}, as given",)
    return [[Candidate(start, preprocessing, given)], singles, pairs]


def _candidate(
    start: RunConfig, changes: dict[str, Any], preprocessing: Preprocessing,
    words: tuple[str, ...],
) -> Candidate | None:  # fmt: skip
    """``start`` with ``changes``, or ``None`` where its runtime refuses that configuration
    (oneDNN off under JAX, XLA under PyTorch)."""
    try:
        return Candidate(replace(start, **changes), preprocessing, words)
    except ConfigError:
        return None


def _on(value: bool) -> str:
    return "on" if value else "off"


@dataclass(frozen=True)
class Reproduction:
    """What the search tried, and its answer."""

    trials: tuple[Trial, ...]
    varied: tuple[str, ...]
    failed: tuple[str, ...] = ()  # candidates whose runs failed, with why

    @property
    def match(self) -> Trial | None:
        return next((trial for trial in self.trials if trial.equal), None)

    @property
    def nearest(self) -> Trial | None:
        if not self.trials:
            return None
        return min(self.trials, key=lambda t: (t.differing, t.max_ulp, len(t.candidate.changes)))

    def sentence(self) -> str:
        """The answer in one sentence."""
        if (match := self.match) is not None:
            return f"your map is {match.label} bit for bit ({match.candidate.name})"
        nearest = self.nearest
        if nearest is None:
            return "no configuration could be run to compare with your map"
        return (
            f"no configuration reproduces it: the nearest is {nearest.label} "
            f"({nearest.candidate.name}) at {nearest.max_ulp:,} ULP ({nearest.differing:,} of "
            f"{nearest.pixels:,} pixels); your pipeline differs in something segdiff does not "
            "vary; check preprocessing"
        )

    @property
    def not_varied(self) -> tuple[str, ...]:
        return _NOT_VARIED


def varied_knobs(stages: Sequence[Sequence[Candidate]]) -> tuple[str, ...]:
    """What a search varies, in words: each single change of its stages."""
    return tuple(c.changes[0] for stage in stages for c in stage if len(c.changes) == 1)
