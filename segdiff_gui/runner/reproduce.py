"""Finding the configuration that reproduces the user's own map (``segdiff reproduce``,
``Study.reproduce``, the window's Reproduce…): the candidates of core/reproduce.py, stage by
stage, each an ordinary cached run, compared with the user's map until one equals it.

The front end hands in how it drives a matrix (the CLI's progress lines, the API's bar, the
window's worker), so the workflow is written once here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import ImageRef
from segdiff_gui.core.preprocess import dtype_divisor
from segdiff_gui.core.reproduce import (
    Candidate,
    Reproduction,
    Trial,
    predict_batch,
    search_stages,
    varied_knobs,
)
from segdiff_gui.core.runtime_defaults import defaults_in_effect
from segdiff_gui.core.text import shape_text
from segdiff_gui.io.image_memory import check_images_fit
from segdiff_gui.io.images import read_image
from segdiff_gui.io.maps import MapFile, target_map
from segdiff_gui.runner.devices import machine_defaults
from segdiff_gui.runner.outcome import Drive
from segdiff_gui.runner.plan import image_refs, index_of_target
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

    def stages(self) -> list[list[Candidate]]:
        target = self.request.images[self.target_index()]
        check_images_fit([[target]])  # from its header, before it is decoded for its type
        machine = machine_defaults(self.request.model, [self.base], self.request.cache.root)
        in_effect = defaults_in_effect(self.base, os.environ, machine)
        image = read_image(target)
        return search_stages(
            self.request.settings.preprocessing,
            len(self.request.images),
            self.target_index(),
            in_effect,
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


def _run_stage(
    search: ReproduceSearch, stage: Sequence[Candidate], drive: Drive
) -> tuple[list[Trial], list[str]]:
    trials: list[Trial] = []
    failed: list[str] = []
    by_preprocessing: dict[object, list[Candidate]] = {}
    for candidate in stage:
        by_preprocessing.setdefault(candidate.preprocessing, []).append(candidate)
    for candidates in by_preprocessing.values():
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
        for candidate, run in zip(candidates, runner.plan.runs, strict=True):
            if run.key in reasons:
                failed.append(f"{candidate.name}: {reasons[run.key]}")
                continue
            record = cache.read_run(run.key)
            assert record.probabilities is not None
            if record.probabilities.shape != search.user_map.shape:
                shape = shape_text(search.user_map.shape)
                wanted = shape_text(record.probabilities.shape)
                raise InputError(
                    search.map_name, f"has shape {shape}; the model's map of the target is {wanted}"
                )
            trials.append(
                Trial.of(
                    candidate,
                    run.key,
                    record.label.removesuffix(" r0"),
                    search.user_map,
                    record.probabilities,
                )  # fmt: skip
            )
    return trials, failed


def reproduce(
    search: ReproduceSearch, drive: Drive, say: Callable[[str], None] = lambda _text: None
) -> Reproduction:
    """Run the search's stages until one holds a configuration equal to the user's map bit
    for bit (a stage is one or two matrices; every run is cached like any other)."""
    search.user_map  # noqa: B018 - read and checked before any child starts
    stages = search.stages()
    trials: list[Trial] = []
    failed: list[str] = []
    names = ("the defaults", "one knob at a time", "pairs of knobs")
    for name, stage in zip(names, stages, strict=True):
        if not stage:
            continue
        say(f"trying {name}: {len(stage)} configuration{'s' * (len(stage) != 1)}")
        found, broken = _run_stage(search, stage, drive)
        trials += found
        failed += broken
        if any(trial.equal for trial in found):
            break
    return Reproduction(tuple(trials), varied_knobs(stages), tuple(failed))
