"""One run request for every front end: the CLI, the window and (later) a Python API each
build a :class:`MatrixRequest` and call :meth:`MatrixRequest.start`. What a request leaves out
takes the defaults of ``core/defaults.py``; what the matrix is when none is given, the model's
settings and the timeout are said here once for all of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from segdiff_gui.core.artefacts import KerasSource, artefact_format
from segdiff_gui.core.config import ModelSettings, RunConfig
from segdiff_gui.core.defaults import DEFAULT_REPEATS, DEFAULT_TIMEOUT_S
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.knobs import KNOBS, KnobRegistry
from segdiff_gui.core.protocol import ChildFatal, ModelAnswer
from segdiff_gui.runner.devices import inspect_model, remembered_inspection, tensorflow_gpus
from segdiff_gui.runner.matrices import artefact_configs, default_configs, source_configs
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import (
    MatrixPlan,
    artefact_facts,
    beside_source,
    check_source,
    fits_source,
    plan_matrix,
)
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

    ``source``: the Keras model the artefact ``model`` was converted from, whose
    ``source_configs`` (by default the artefact's devices and batches, and the exact run)
    run beside the artefact's on the same images and settings, one study of both.
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
    source: Path | None = None
    source_configs: tuple[RunConfig, ...] = ()

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

    def source_configurations(self, gpus: Sequence[str] = ()) -> list[RunConfig]:
        """What the Keras source runs beside the artefact (:attr:`source_configs`, or each
        of the artefact's devices and batches at the source's defaults, and the exact run)."""
        if self.source_configs:
            return list(self.source_configs)
        return source_configs(self.configurations(gpus))

    def keras_source(self, ask: bool = False) -> KerasSource | None:
        """The source, checked as a Keras model beside an artefact that takes its input and
        gives its outputs (what a child said of it: remembered, or with ``ask`` asked now),
        or None where none is given."""
        if self.source is None:
            return None
        source = check_source(self.model, self.source)
        facts = artefact_facts(self.model)
        assert facts is not None  # check_source: the model is an artefact
        trust, path = self.settings.trust_model, Path(source.path)
        if ask:
            answer: ModelAnswer | ChildFatal | None = inspect_model(
                path, trust, state_dir=self.cache.root, model_hash=source.sha256
            )
        else:
            answer = remembered_inspection(self.cache.root, path, source.sha256, trust)
        if isinstance(answer, ChildFatal):
            raise InputError(answer.path, answer.problem, answer.fix)
        if answer is not None:
            fits_source(facts, answer, path)
        return source

    def devices(self) -> list[str]:
        """The GPUs TensorFlow sees (asked of a child, remembered per machine; none without
        a child where the machine has no GPU device files)."""
        return tensorflow_gpus(self.cache.root)

    def with_configs(self, configs: Sequence[RunConfig]) -> MatrixRequest:
        """The same request over other configurations (an attribution's, say)."""
        return replace(self, configs=tuple(configs))

    def plan(self, gpus: Sequence[str] = (), *, ask: bool = False) -> MatrixPlan:
        """Plan the request for ``gpus`` without asking for devices: what is cached shows at
        once, before any TensorFlow child starts. An artefact's source is planned beside it
        (whether it fits is asked of a child only with ``ask``: :meth:`keras_source`)."""
        source = self.keras_source(ask)
        plan = self._planned(self.model, self.configurations(gpus), source)
        if source is None:
            return plan
        configs = self.source_configurations(gpus)
        return beside_source(plan, self._planned(Path(source.path), configs, None))

    def _planned(
        self, model: Path, configs: Sequence[RunConfig], source: KerasSource | None
    ) -> MatrixPlan:
        return plan_matrix(
            model,
            self.images,
            configs,
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
            source=source,
        )

    def start(self, gpus: Sequence[str] | None = None) -> MatrixRunner:
        """Plan the whole request (asking for the GPUs when the matrix depends on them and
        ``gpus`` is not given) and return its runner; iterate :meth:`MatrixRunner.run`. The
        cache is claimed first: the devices' answer is remembered there."""
        self.cache.claim()
        if gpus is None:
            gpus = self.devices() if self.needs_devices else []
        plan = self.plan(gpus, ask=True)
        self.cache.remove_stale_temporaries()  # what a killed run left behind
        return MatrixRunner(plan, self.cache, timeout_s=self.timeout_s)
