"""One run request for every front end: the CLI, the window and (later) a Python API each
build a :class:`MatrixRequest` and call :meth:`MatrixRequest.start`. What a request leaves out
takes the defaults of ``core/defaults.py``; what the matrix is when none is given, the model's
settings and the timeout are said here once for all of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from segdiff_gui.core.artefacts import artefact_format
from segdiff_gui.core.config import ModelSettings, RunConfig
from segdiff_gui.core.defaults import DEFAULT_REPEATS, DEFAULT_TIMEOUT_S
from segdiff_gui.core.knobs import KNOBS, KnobRegistry
from segdiff_gui.runner.devices import tensorflow_gpus
from segdiff_gui.runner.matrices import artefact_configs, default_configs
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import MatrixPlan, artefact_facts, plan_matrix
from segdiff_gui.storage.cache import ResultCache

__all__ = ["MatrixRequest", "ModelSettings"]


@dataclass(frozen=True)
class MatrixRequest:
    """A model on images under a matrix of configurations, repeated, in a cache.

    ``configs`` empty means ``matrix`` of the devices present (by default batch 1 and 64 on
    every device), which asks a TensorFlow child for the GPUs when the request starts.
    ``target`` names the image studied (default: the first); ``sweep`` studies every image,
    ``shard=(K, N)`` only shard K of N of them. A configuration the model cannot take is
    skipped and said (``MatrixPlan.skipped``) while the others run, unless ``strict``: then
    it refuses the request, as a workflow that needs every configuration asks.
    """

    model: Path
    images: tuple[Path, ...]
    cache: ResultCache
    configs: tuple[RunConfig, ...] = ()
    matrix: Callable[[Sequence[str]], list[RunConfig]] = default_configs
    repeats: int = DEFAULT_REPEATS
    target: str | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)
    timeout_s: float = DEFAULT_TIMEOUT_S
    sweep: bool = False
    shard: tuple[int, int] | None = None
    knobs: KnobRegistry = KNOBS
    strict: bool = False

    @property
    def needs_devices(self) -> bool:
        """Whether the matrix depends on the GPUs present (no configurations were given, and
        the model is not an artefact, whose default matrix is its runtime's on the CPU)."""
        return not self.configs and artefact_format(self.model) is None

    def configurations(self, gpus: Sequence[str] = ()) -> list[RunConfig]:
        if self.configs:
            return list(self.configs)
        if (facts := artefact_facts(self.model)) is not None:
            return artefact_configs(facts.format.runtime, facts.fixed_batch)
        return self.matrix(list(gpus))

    def devices(self) -> list[str]:
        """The GPUs TensorFlow sees (asked of a child, remembered per machine; none without
        a child where the machine has no GPU device files)."""
        return tensorflow_gpus(self.cache.root)

    def with_configs(self, configs: Sequence[RunConfig]) -> MatrixRequest:
        """The same request over other configurations (an attribution's, say)."""
        return replace(self, configs=tuple(configs))

    def plan(self, gpus: Sequence[str] = ()) -> MatrixPlan:
        """Plan the request for ``gpus`` without asking for devices: what is cached shows at
        once, before any TensorFlow child starts."""
        return plan_matrix(
            self.model,
            self.images,
            self.configurations(gpus),
            cache=self.cache,
            repeats=self.repeats,
            target=self.target,
            preprocessing=self.settings.preprocessing,
            output=self.settings.output,
            trust_model=self.settings.trust_model,
            trust_preprocess=self.settings.trust_preprocess,
            sweep=self.sweep,
            shard=self.shard,
            knobs=self.knobs,
            strict=self.strict,
        )

    def start(self, gpus: Sequence[str] | None = None) -> MatrixRunner:
        """Plan the whole request (asking for the GPUs when the matrix depends on them and
        ``gpus`` is not given) and return its runner; iterate :meth:`MatrixRunner.run`. The
        cache is claimed first: the devices' answer is remembered there."""
        self.cache.claim()
        if gpus is None:
            gpus = self.devices() if self.needs_devices else []
        plan = self.plan(gpus)
        self.cache.remove_stale_temporaries()  # what a killed run left behind
        return MatrixRunner(plan, self.cache, timeout_s=self.timeout_s)
