"""Finding the configuration that reproduces the user's own map (``segdiff reproduce``,
``Study.reproduce``, the window's Reproduce…): the candidates of core/reproduce.py, stage by
stage, each an ordinary cached run, compared with the user's map until one equals it. The
search starts under every runtime the model file runs under (:meth:`ReproduceSearch.runtimes`);
a runtime whose child cannot load the model is said among the failed candidates, and the
search goes on under the others.

The front end hands in how it drives a matrix (the CLI's progress lines, the API's bar, the
window's worker), so the workflow is written once here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from segdiff_gui.core.artefacts import artefact_format
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.job import ImageRef
from segdiff_gui.core.preprocess import dtype_divisor
from segdiff_gui.core.reproduce import (
    Candidate,
    Reproduction,
    SearchPlan,
    Stage,
    Start,
    Trial,
    predict_batch,
    search_stages,
)
from segdiff_gui.core.runtime_defaults import defaults_in_effect
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.text import shape_text
from segdiff_gui.io.image_memory import check_images_fit
from segdiff_gui.io.images import read_image
from segdiff_gui.io.maps import MapFile, target_map
from segdiff_gui.runner.devices import machine_defaults
from segdiff_gui.runner.outcome import Drive
from segdiff_gui.runner.plan import image_refs, index_of_target, model_refusal
from segdiff_gui.runner.request import MatrixRequest

__all__ = ["ReproduceSearch", "reproduce"]


@dataclass(frozen=True)
class ReproduceSearch:
    """The search's inputs: the user's map of the target, and the request naming the model,
    the images (in the user's order), the target, the cache and the model settings."""

    maps: MapFile  # the map file's (io/maps.open_maps), or one array's (MapFile.of_array)
    request: MatrixRequest
    map_name: str = "your map"
    # Where the search starts: the defaults, or a runtime's (runtime=jax for a JAX pipeline).
    base: RunConfig = RunConfig()

    @cached_property
    def _refs(self) -> list[ImageRef]:
        return image_refs(list(self.request.images))

    def target_index(self) -> int:
        return index_of_target(self._refs, self.request.target)

    @cached_property
    def user_map(self) -> np.ndarray:
        """The target's map among :attr:`maps` (io/maps.target_map): only its array is read."""
        names = [ref.name for ref in self._refs]
        return target_map(self.map_name, self.maps, names, self.target_index())

    def ordered_images(self) -> tuple[Path, ...]:
        """The images as a candidate's request takes them: the target first, then the others
        of its ``model.predict`` batch in their order, then the rest. segdiff fills a batch
        from the images after the target, so the batch then holds the user's batch, in the
        user's order, with the target at its own position."""
        images = list(self.request.images)
        target = self.target_index()
        size, _, first = predict_batch(len(images), target)
        chunk = [i for i in range(first, first + size) if i != target]
        rest = [i for i in range(len(images)) if i != target and i not in chunk]
        return tuple(images[i] for i in (target, *chunk, *rest))

    def runtimes(self) -> tuple[str, ...]:
        """The runtimes the search starts under: the base's where the user named one; else
        every installed runtime that reads this model file as it is: a user's artefact's
        format's (an ``.onnx`` under ONNX Runtime and OpenVINO), or Keras 3 and, for a
        ``.h5``, a Keras 2 SavedModel or a ``.keras`` it wrote, Keras 2."""
        base, model = self.base, self.request.model
        if base.runtime != RunConfig().runtime:
            return (base.runtime,)  # the user said which
        artefact = artefact_format(model)
        if artefact is not None:
            names = artefact.runtimes
        else:
            keras2 = (runtime.name for runtime in RUNTIMES.values() if runtime.keras == 2)
            names = (base.runtime, *keras2)
        found = []
        for name in names:
            try:
                config = replace(base, runtime=name)
            except ConfigError:  # a knob of the base that runtime refuses
                continue
            if name == base.runtime or (
                RUNTIMES[name].installed()
                and (artefact is not None or model_refusal(model, config) is None)
            ):
                found.append(name)
        return tuple(found) or (base.runtime,)

    def plan(self) -> SearchPlan:
        target = self.request.images[self.target_index()]
        check_images_fit([[target]])  # from its header, before it is decoded for its type
        configs = [replace(self.base, runtime=runtime) for runtime in self.runtimes()]
        machine = machine_defaults(self.request.model, configs, self.request.cache.root)
        starts = [Start(c, defaults_in_effect(c, os.environ, machine)) for c in configs]
        image = read_image(target)
        return search_stages(
            self.request.settings.preprocessing,
            len(self.request.images),
            self.target_index(),
            starts,
            dtype_divisor(image.dtype),
            self.base,
        )

    def request_for(self, candidates: Sequence[Candidate]) -> MatrixRequest:
        """One matrix of ``candidates`` (which share their preprocessing), one repeat each."""
        images = self.ordered_images()
        settings = replace(self.request.settings, preprocessing=candidates[0].preprocessing)
        return replace(
            self.request,
            images=images,
            target=str(images[0]),
            configs=tuple(candidate.config for candidate in candidates),
            repeats=1,
            settings=settings,
            sweep=False,
            shard=None,
        )


@dataclass
class _Progress:
    """What the search has found so far: its trials, the candidates that failed (with why),
    and the runtimes whose child could not load the model."""

    trials: list[Trial] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    dead: set[str] = field(default_factory=set)


def _run_stage(search: ReproduceSearch, stage: Stage, drive: Drive, found: _Progress) -> bool:
    """Run ``stage``'s candidates (one matrix per preprocessing); whether one equals the
    user's map. Where a matrix of several runtimes stops on an input error (a child could not
    load the model), each runtime's candidates are run alone: a runtime that cannot load it
    is said among the failed and searched no further, the others go on."""
    by_preprocessing: dict[object, list[Candidate]] = {}
    for candidate in stage.candidates:
        if candidate.config.runtime not in found.dead:
            by_preprocessing.setdefault(candidate.preprocessing, []).append(candidate)
    matched = False
    for candidates in by_preprocessing.values():
        try:
            matched |= _run_candidates(search, candidates, drive, found)
        except InputError as error:
            runtimes = list(dict.fromkeys(c.config.runtime for c in candidates))
            if len(runtimes) < 2:
                raise
            matched |= _each_runtime_alone(search, candidates, runtimes, drive, found, error)
    return matched


def _each_runtime_alone(
    search: ReproduceSearch,
    candidates: Sequence[Candidate],
    runtimes: Sequence[str],
    drive: Drive,
    found: _Progress,
    error: InputError,
) -> bool:
    """``candidates`` run one runtime at a time, after their matrix of ``runtimes`` stopped on
    ``error``; raised again where no runtime could run its candidates."""
    matched, refused = False, 0
    for runtime in runtimes:
        own = [candidate for candidate in candidates if candidate.config.runtime == runtime]
        try:
            matched |= _run_candidates(search, own, drive, found)
        except InputError as why:
            refused += 1
            found.dead.add(runtime)
            found.failed.append(f"{_names(own)} under {RUNTIMES[runtime].title}: {why}")
    if refused == len(runtimes):
        raise error
    return matched


def _names(candidates: Sequence[Candidate]) -> str:
    names = [candidate.name for candidate in candidates]
    return names[0] if len(names) == 1 else f"{len(names)} configurations"


def _run_candidates(
    search: ReproduceSearch, candidates: Sequence[Candidate], drive: Drive, found: _Progress
) -> bool:
    """One matrix of ``candidates`` (which share their preprocessing); whether one equals the
    user's map."""
    # Every candidate or none: its runs are matched to the candidates one for one.
    request = replace(search.request_for(candidates), strict=True)
    runner = request.start(gpus=[])
    outcome = drive(runner)
    if outcome.interrupted:
        raise KeyboardInterrupt
    if (error := outcome.input_error()) is not None:
        raise error
    reasons = {run["key"]: run["error"] for run in outcome.failed}
    cache = request.cache
    matched = False
    for candidate, run in zip(candidates, runner.plan.runs, strict=True):
        if run.key in reasons:
            found.failed.append(f"{candidate.name}: {reasons[run.key]}")
            continue
        record = cache.read_run(run.key)
        assert record.probabilities is not None
        if record.probabilities.shape != search.user_map.shape:
            shape = shape_text(search.user_map.shape)
            wanted = shape_text(record.probabilities.shape)
            raise InputError(
                search.map_name, f"has shape {shape}; the model's map of the target is {wanted}"
            )
        trial = Trial.of(
            candidate, run.key, record.label.removesuffix(" r0"), search.user_map,
            record.probabilities,
        )  # fmt: skip
        found.trials.append(trial)
        matched |= trial.equal
    return matched


def reproduce(
    search: ReproduceSearch, drive: Drive, say: Callable[[str], None] = lambda _text: None
) -> Reproduction:
    """Run the search's stages until one holds a configuration equal to the user's map bit
    for bit: every runtime's start, then each runtime's knobs, the nearest runtime first (a
    stage is one or two matrices; every run is cached like any other)."""
    search.user_map  # noqa: B018 - read and checked before any child starts
    plan = search.plan()
    found = _Progress()
    stage: Stage | None = plan.first()
    later: list[Stage] | None = None
    while stage is not None:
        count = len(stage.candidates)
        say(f"trying {stage.words}: {count} configuration{'s' * (count != 1)}")
        if _run_stage(search, stage, drive, found):
            break
        if later is None:  # ordered by how near each runtime's start came
            later = plan.later(found.trials, found.dead)
        stage = next((s for s in later if s.runtime not in found.dead), None)
        if stage is not None:
            later.remove(stage)
    return Reproduction(tuple(found.trials), plan.varied(), tuple(found.failed))
