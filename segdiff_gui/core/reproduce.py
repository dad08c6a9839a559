"""Which configuration reproduces the user's own map (``segdiff reproduce``): the candidates,
searched from the defaults under every runtime the model file runs under, then one knob at a
time and then in pairs under each, and the answer in one sentence. Pure: the runner runs the
candidates (runner/reproduce.py) and hands their maps here.

What is varied is what moves a map on a CPU without the user noticing: the runtime (Keras 3 or
Keras 2 on the same ``.h5``: a user's ``TF_USE_LEGACY_KERAS=1`` script), oneDNN (TensorFlow's
default depends on the CPU), the batch the target was inferred in (``model.predict``'s batches
of 32 of the images, in their order), XLA, the intra-op thread count, and the preprocessing's
arithmetic (dividing by 255 or multiplying by float32(1/255)). Every runtime's defaults are
tried first, so that a map a runtime computes is never put down to its preprocessing; then
each runtime's knobs, the runtime whose defaults came nearest the user's map first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
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
from segdiff_gui.core.runtimes import RUNTIMES

__all__ = [
    "Candidate",
    "KERAS_PREDICT_BATCH",
    "Reproduction",
    "SearchPlan",
    "Stage",
    "Start",
    "Trial",
    "other_arithmetic",
    "predict_batch",
    "search_stages",
]

# model.predict's default batch_size: the target's batch is its block of 32 of the images.
KERAS_PREDICT_BATCH = 32
_CHECK_PREPROCESSING = (
    "your pipeline differs in something segdiff does not vary; check preprocessing"
)
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "changes": list(self.candidate.changes),
            "key": self.key,
            "differing_pixels": self.differing,
            "max_ulp": self.max_ulp,
        }

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


@dataclass(frozen=True)
class Start:
    """Where a search starts under one runtime: its configuration (the defaults, or what the
    user gave) and what its unset knobs are on this machine."""

    config: RunConfig
    in_effect: DefaultsInEffect = DefaultsInEffect()


@dataclass(frozen=True)
class Stage:
    """Candidates run together, and what they are in words: ``one knob at a time under
    tf_keras``."""

    words: str
    candidates: tuple[Candidate, ...]
    runtime: str = ""  # the runtime its candidates run under ("" for every start's)


@dataclass(frozen=True)
class SearchPlan:
    """A search's candidates: each runtime's start, then each runtime's single knobs, then its
    pairs. :meth:`stages` orders the later stages by the starts' trials."""

    starts: tuple[Candidate, ...]
    singles: Mapping[str, tuple[Candidate, ...]]  # by runtime, in the starts' order
    pairs: Mapping[str, tuple[Candidate, ...]]

    @property
    def runtimes(self) -> tuple[str, ...]:
        return tuple(candidate.config.runtime for candidate in self.starts)

    def first(self) -> Stage:
        """Every runtime's start, together: ``the defaults under TensorFlow and tf_keras``
        (one runtime's: its start's name, ``the defaults``)."""
        if len(self.starts) == 1:
            return Stage(self.starts[0].name, self.starts)
        return Stage(f"the defaults under {self._titles(self.runtimes)}", self.starts)

    def later(self, trials: Sequence[Trial] = (), skip: Collection[str] = ()) -> list[Stage]:
        """The stages after :meth:`first`, in the order they are run: one knob at a time under
        each runtime, the runtime whose start came nearest the user's map (``trials``) first,
        then pairs in that order; runtimes in ``skip`` (whose child could not load the model)
        left out."""
        distance = {
            trial.candidate.config.runtime: (trial.differing, trial.max_ulp)
            for trial in trials
            if trial.candidate in self.starts
        }
        order = sorted(
            (runtime for runtime in self.runtimes if runtime not in skip),
            key=lambda runtime: distance.get(runtime, (_FAR, _FAR)),
        )  # a stable sort: a tie keeps the starts' order
        several = len(self.starts) > 1
        stages = []
        for words, by_runtime in (
            ("one knob at a time", self.singles),
            ("pairs of knobs", self.pairs),
        ):
            for runtime in order:
                if by_runtime[runtime]:
                    under = f" under {self._titles((runtime,))}" if several else ""
                    stages.append(Stage(words + under, by_runtime[runtime], runtime))
        return stages

    @staticmethod
    def _titles(runtimes: Sequence[str]) -> str:
        """``TensorFlow and tf_keras``."""
        titles = [RUNTIMES[runtime].title for runtime in runtimes]
        return " and ".join([", ".join(titles[:-1]), titles[-1]] if len(titles) > 1 else titles)

    def varied(self) -> tuple[str, ...]:
        """What the search varies, in words: the runtime (where there are several), then each
        single change of any runtime's, once."""
        said = [f"the runtime ({self._titles(self.runtimes)})"] if len(self.starts) > 1 else []
        for candidates in self.singles.values():
            for candidate in candidates:
                if (words := candidate.changes[-1]) not in said:
                    said.append(words)
        return tuple(said)


_FAR = 1 << 62  # a runtime whose start gave no map: searched last


def search_stages(
    preprocessing: Preprocessing,
    image_count: int,
    target: int,
    starts: Sequence[Start],
    dtype_max: float | None,
    given: RunConfig | None = None,
) -> SearchPlan:
    """The candidates: each of ``starts`` (its runtime's defaults, or the configuration the
    user gave; the first is the user's runtime, the others runtimes the same file runs under);
    each knob alone from each; each pair of knobs. A later stage is run only when the ones
    before found no match; a candidate the runtime refuses is left out. ``given``: what the
    user gave (default: the first start), said as given where it is not the defaults."""
    first = starts[0].config
    given = first if given is None else given
    given_words = () if given == RunConfig() else (f"{KNOBS.changed_spec(given)}, as given",)
    start_candidates = []
    singles: dict[str, tuple[Candidate, ...]] = {}
    pairs: dict[str, tuple[Candidate, ...]] = {}
    for start in starts:
        runtime = start.config.runtime
        # Another runtime than the user's: said as the difference in every candidate's name.
        other = () if runtime == first.runtime else (_runtime_words(runtime, first.runtime),)
        start_candidates.append(Candidate(start.config, preprocessing, other or given_words))
        one, two = _knob_candidates(preprocessing, image_count, target, start, dtype_max)
        singles[runtime] = tuple(replace(c, changes=other + c.changes) for c in one)
        pairs[runtime] = tuple(replace(c, changes=other + c.changes) for c in two)
    return SearchPlan(tuple(start_candidates), singles, pairs)


def _runtime_words(runtime: str, instead_of: str) -> str:
    """``the runtime: tf_keras, not TensorFlow``."""
    return f"the runtime: {RUNTIMES[runtime].title}, not {RUNTIMES[instead_of].title}"


def _knob_candidates(
    preprocessing: Preprocessing,
    image_count: int,
    target: int,
    start: Start,
    dtype_max: float | None,
) -> tuple[list[Candidate], list[Candidate]]:
    """Each knob alone from ``start``, and each pair of them."""
    base, in_effect = start.config, start.in_effect
    size, position, _ = predict_batch(image_count, target)
    wanted: list[tuple[dict[str, Any], Preprocessing, str]] = []
    if in_effect.onednn is not None and base.onednn is None:
        wanted.append(({"onednn": not in_effect.onednn}, preprocessing,
                       f"oneDNN {_on(not in_effect.onednn)}"))  # fmt: skip
    if size > 1 and base.batch == 1:
        wanted.append(({"batch": size, "position": position}, preprocessing,
                       f"batch {size} (model.predict's batch of these images)"))  # fmt: skip
    # XLA the other way from what the start computes with (model.predict's choice, unless
    # set); a runtime where XLA means nothing refuses the candidate.
    xla = bool(in_effect.applied(base).xla)
    wanted.append(({"xla": not xla}, preprocessing, f"XLA {_on(not xla)}"))
    if base.threads != 1:
        wanted.append(({"threads": 1}, preprocessing, "1 intra-op thread"))
    if (arithmetic := other_arithmetic(preprocessing, dtype_max)) is not None:
        wanted.append(({}, arithmetic[0], arithmetic[1]))
    singles = [
        candidate
        for changes, chosen, words in wanted
        if (candidate := _candidate(base, changes, chosen, (words,))) is not None
    ]
    pairs = [
        candidate
        for (one, first, said), (two, second, told) in combinations(wanted, 2)
        if (
            candidate := _candidate(
                base, {**one, **two}, first if first != preprocessing else second, (said, told)
            )
        )
        is not None
    ]
    return singles, pairs


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
        said = (
            f"no configuration reproduces it: the nearest is {nearest.label} "
            f"({nearest.candidate.name}) at {nearest.max_ulp:,} ULP ({nearest.differing:,} of "
            f"{nearest.pixels:,} pixels)"
        )
        if (runtime := self._nearer_runtime()) is not None:
            return (
                f"{said}, nearer than any run under another runtime: your pipeline ran "
                f"{runtime}, and differs in something segdiff does not vary (its version or "
                "build, or the call)"
            )
        return f"{said}; {_CHECK_PREPROCESSING}"

    def _nearer_runtime(self) -> str | None:
        """The title of the runtime whose runs came nearest the user's map, where several
        runtimes were tried and the nearest under it is nearer than every other's: then the
        runtime is the difference found, not the preprocessing."""
        nearest: dict[str, tuple[int, int]] = {}
        for trial in self.trials:
            runtime = trial.candidate.config.runtime
            distance = (trial.differing, trial.max_ulp)
            nearest[runtime] = min(nearest.get(runtime, distance), distance)
        if len(nearest) < 2:
            return None
        best, *rest = sorted(nearest.items(), key=lambda item: item[1])
        return RUNTIMES[best[0]].title if all(best[1] < other for _, other in rest) else None

    @property
    def not_varied(self) -> tuple[str, ...]:
        return _NOT_VARIED

    def to_dict(self) -> dict[str, Any]:
        """The answer, what was varied and not, what failed, and every trial: what
        ``segdiff reproduce --json`` prints and ``Reproduced.to_dict()`` returns, each with its
        own way to compute the match again."""
        match = self.match
        return {
            "sentence": self.sentence(),
            "match": match.label if match else None,
            "varied": list(self.varied),
            "not_varied": list(self.not_varied),
            "failed": list(self.failed),
            "trials": [trial.to_dict() for trial in self.trials],
        }
