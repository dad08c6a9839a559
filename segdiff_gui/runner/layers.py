"""The layer probe between two configurations of one model on one image.

Three steps, each a front end drives like a matrix: the plain runs the probes do not compute
themselves (:meth:`LayerProbeSession.plain_runner`: those cached), the probes each
configuration still needs, each in the child its process-level knobs require, which computes
its plain run first where the cache has none, a Keras model's or a converted one's
(:meth:`probe_runner`: one child, not a run child and then a probe child), and the
comparison, read from the two probes one piece of one layer at a time (:meth:`compare`). A
comparison is stored; asking again is served from the cache without starting a child.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import MapComparison, compare_maps, is_multiclass
from segdiff_gui.core.artefacts import artefact_format
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.defaults import (
    DEFAULT_CUTOFF,
    DEFAULT_LAYER_DISK_BUDGET,
    DEFAULT_LAYER_MEMORY_BUDGET,
)
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.job import EngineJob, PlannedRun
from segdiff_gui.core.layer_stats import (
    LayerComparison,
    LayerStats,
    compare_layer_blocks,
    layer_sentences,
)
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import MatrixPlan, jobs_for
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.hdf5_access import UnreadableEntry
from segdiff_gui.storage.layers import LayerStore, StoredComparison, comparison_key, probe_key
from segdiff_gui.storage.probe_files import ProbeTensors, matched_as_now

__all__ = ["LayerProbe", "LayerProbeSession", "compare_stored", "final_maps_of"]


@dataclass(frozen=True)
class LayerProbe:
    """A finished probe: the stored comparison and what the budget kept."""

    stored: StoredComparison
    tensors_kept: bool  # both sides' layer tensors are still in the cache
    served_from_cache: bool

    @property
    def comparison(self) -> LayerComparison:
        return self.stored.comparison

    @property
    def reference_label(self) -> str:
        return str(self.stored.reference["label"])

    @property
    def other_label(self) -> str:
        return str(self.stored.other["label"])

    def final(self, cutoff: float = DEFAULT_CUTOFF) -> MapComparison:
        """The final maps compared at ``cutoff``: the flips of the last row."""
        return compare_maps(*self.stored.final_maps, cutoff=cutoff)

    def fidelity(self) -> list[str]:
        """Whether each side's probe computed its final map bit for bit as its plain run."""
        lines = []
        for side in (self.stored.reference, self.stored.other):
            final = side.get("final", {})
            if final.get("bitwise_equal"):
                lines.append(f"{side['label']}: the probe's final map equals its run bit for bit")
            else:
                lines.append(
                    f"{side['label']}: the probe's final map differs from its run in "
                    f"{final.get('differing_pixels', '?')} pixels (up to {final.get('max_ulp')} "
                    "ULP): computing layer by layer changed the numerics (the runtime fuses "
                    "across layers); figures are the probe's own, its final row too"
                )
        return lines

    def sentences(self, cutoff: float = DEFAULT_CUTOFF) -> list[str]:
        """Where the difference is born and grows, what it does at the output, and whether
        the probe measured what the runs compute."""
        lines = layer_sentences(self.comparison)
        final = self.final(cutoff)
        noun = "flip" if final.flips == 1 else "flips"
        flips = (
            f"{final.flips:,} class {noun} (argmax)"
            if is_multiclass(self.stored.final_maps[0])
            else f"{final.flips:,} {noun} at cutoff {format_float32(cutoff)}"
        )
        source = "" if self.stored.final_source == "plain runs" else " (the probes' own maps)"
        lines.append(
            f"At the output{source}: {final.differing_pixels:,} of {final.pixels:,} pixels "
            f"differ, by up to {final.max_ulp:,} ULP; {flips}."
        )
        lines += [line + "." for line in self.fidelity() if "differs" in line]
        return lines

    def to_dict(self, cutoff: float = DEFAULT_CUTOFF) -> dict[str, Any]:
        final = self.final(cutoff)
        return {
            "reference": self.stored.reference,
            "other": self.stored.other,
            **self.comparison.to_dict(),
            "final": {**final.to_dict(), "source": self.stored.final_source},
            "tensors_kept": self.tensors_kept,
            "served_from_cache": self.served_from_cache,
        }


def _aligned(
    first: Iterator[np.ndarray], second: Iterator[np.ndarray]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Matching row blocks of two layers stored in pieces of different sizes."""
    a = b = None
    while True:
        if a is None or not len(a):
            a = next(first, None)
        if b is None or not len(b):
            b = next(second, None)
        if a is None or b is None:
            return
        if a.ndim == 0 or b.ndim == 0:  # a scalar output: one block
            yield a, b
            return
        rows = min(len(a), len(b))
        yield a[:rows], b[:rows]
        a, b = a[rows:], b[rows:]


def compare_stored(
    reference: ProbeTensors, other: ProbeTensors
) -> tuple[LayerComparison, dict[int, np.ndarray]]:
    """Every layer of two stored probes compared, one piece of each at a time. A converted
    runtime's probe lacks the layers it has no tensor for (its ``unmatched``): those are left
    out, and any other difference in layers means the two do not run the same network."""
    unmatched = _unmatched(reference) | _unmatched(other)
    ours = [info for info in reference.layers if info.name not in unmatched]
    theirs = [info for info in other.layers if info.name not in unmatched]
    if [(i.name, i.shape) for i in ours] != [(i.name, i.shape) for i in theirs]:
        names = {i.name for i in ours} ^ {i.name for i in theirs}
        said = f" ({', '.join(sorted(names)[:3])})" if names else " (their shapes differ)"
        raise InputError(
            other.meta.get("label", other.where),
            f"has other layers than {reference.meta.get('label', reference.where)}{said}: "
            "the two configurations do not run the same network",
        )
    stats: list[LayerStats] = []
    spatial: dict[int, np.ndarray] = {}
    for position, (info, their_info) in enumerate(zip(ours, theirs, strict=True)):
        blocks = _aligned(reference.pieces(info.index), other.pieces(their_info.index))
        figures, where = compare_layer_blocks(info.name, info.shape, blocks)
        # A quantized side (the user's int8 artefact): its scale, and the node of its graph.
        quantized = their_info if their_info.scale is not None else info
        node = their_info.node or info.node
        stats.append(
            replace(figures, scale=quantized.scale, zero_point=quantized.zero_point, node=node)
        )
        if where is not None:
            spatial[position] = where
    kept = {info.name for info in ours}
    named = [*_unmatched_list(reference), *_unmatched_list(other)]
    left_out = tuple(dict.fromkeys(name for name in named if name not in kept))
    return LayerComparison(tuple(stats), left_out), spatial


def _unmatched_list(probe: ProbeTensors) -> list[str]:
    """The layers a converted runtime's probe has no tensor for, in the model's order."""
    names = probe.meta.get("unmatched", [])
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def _unmatched(probe: ProbeTensors) -> set[str]:
    return set(_unmatched_list(probe))


class LayerProbeSession:
    """One probe between ``reference`` and ``other`` (configurations of ``request``). Where
    the request's model is the user's own artefact beside its Keras source,
    ``reference`` is the source's configuration and ``other`` the artefact's: the source's
    probe is a Keras probe, the artefact's its runtime's tensors matched to the source's layers
    by the graph, each in a child of its own."""

    def __init__(
        self,
        request: MatrixRequest,
        reference: RunConfig,
        other: RunConfig,
        memory_budget: int = DEFAULT_LAYER_MEMORY_BUDGET,
        disk_budget: int = DEFAULT_LAYER_DISK_BUDGET,
    ) -> None:
        if request.source is None and artefact_format(request.model) is not None:
            raise InputError(
                request.model,
                "is your own artefact: its layers are compared with those of the Keras model it "
                "was converted from, its source, which was not given",
                fix="source",
            )
        if reference == other and request.source is None:
            raise InputError("layers", f"both sides are {reference.label()}: nothing to compare")
        if exact := next((config for config in (reference, other) if config.is_exact), None):
            raise InputError(
                "layers",
                f"{exact.label()} is the exact reference (float64): the layer probe stores "
                "and compares float32 layers, and would round it; compare its map instead",
            )
        if memory_budget < 1 << 20:
            raise InputError("memory budget", "must be at least 1 MiB")
        # Both sides or none: a side the model cannot take refuses the probe.
        self.request = replace(
            request, configs=(reference, other), repeats=1, sweep=False, strict=True
        )
        if request.source is not None:  # the source's side, then the artefact's
            self.request = replace(self.request, configs=(other,), source_configs=(reference,))
        self.configs = (reference, other)
        self.memory_budget, self.disk_budget = memory_budget, disk_budget
        self.store = LayerStore(request.cache)
        self.plan: MatrixPlan = self.request.plan(ask=request.source is not None)
        self.plan.check_storable()
        if self.plan.source is not None:
            mine = [run for run in self.plan.runs if run not in self.plan.source.runs]
            self.sides: tuple[PlannedRun, PlannedRun] = (self.plan.source.runs[0], mine[0])
        else:
            by_config = {run.config: run for run in self.plan.runs}
            self.sides = (by_config[reference], by_config[other])
        self.key = comparison_key(*(probe_key(run.key) for run in self.sides))
        # Its probes and comparison are written into the cache, even where both runs are
        # there already: a cache that cannot store them refuses it now, in its one line
        # (unless the comparison is stored whole: read only then, once cached_result reads it).
        if (problem := request.cache.write_problem()) is not None and self.stored() is None:
            raise problem

    def stored(self) -> StoredComparison | None:
        """The comparison, if the cache has it whole (a damaged one, or one of a converted
        probe matched otherwise than now, is computed again)."""
        try:
            stored = self.store.read_comparison(self.key)
        except UnreadableEntry:
            return None
        if stored is None or not all(map(matched_as_now, (stored.reference, stored.other))):
            return None  # a converted side matched as segdiff no longer does: made again
        return stored

    def plain_runner(self) -> MatrixRunner:
        """The plain runs (each probe is checked against its side's) the probes' children do
        not compute themselves: the cached ones, and those :meth:`_probed_with_its_run`
        leaves out."""
        self.request.cache.remove_stale_temporaries()
        cached = set(self.plan.cached)
        here = tuple(
            run for run in self.plan.runs if run in cached or not self._probed_with_its_run(run)
        )
        computed = [run for run in here if run not in cached]
        plan = replace(self.plan, runs=here, jobs=self._jobs(computed))
        return MatrixRunner(plan, self.request.cache, timeout_s=self.request.timeout_s)

    def _jobs(self, runs: Sequence[PlannedRun], **changes: Any) -> tuple[EngineJob, ...]:
        """``runs`` as jobs of their model's plan (an artefact's source has its own)."""
        source = self.plan.source
        theirs = {run.key for run in source.runs} if source is not None else set()
        jobs: tuple[EngineJob, ...] = ()
        for plan, chosen in (
            (source, [run for run in runs if run.key in theirs]),
            (self.plan, [run for run in runs if run.key not in theirs]),
        ):
            if plan is not None and chosen:
                assert plan.template is not None
                jobs += jobs_for(plan.template, chosen, self.request.knobs, **changes)
        return jobs

    def _probed_with_its_run(self, run: PlannedRun) -> bool:
        """Whether the child that probes ``run`` computes its plain run too (a Keras model's
        or a converted runtime's, through its ordinary forward pass or session): where the
        cache has no file for the run (a damaged one is computed again by the plain runs, as
        any matrix does) and its probe is still to make. A whole probe only needs its plain
        run for the comparison."""
        return not self.request.cache.has(run.key) and not self._probe_is_whole(run)

    def _probe_is_whole(self, run: PlannedRun) -> bool:
        try:
            with self.store.open_probe(probe_key(run.key)) as tensors:
                return matched_as_now(tensors.meta)
        except (UnreadableEntry, OSError):
            return False

    def probe_runner(self) -> MatrixRunner:
        """The probes still missing, each in the child of its process-level settings (both
        sides in one where they agree; the child computes a plain run first, where the cache
        has none)."""
        needed = tuple(run for run in self.sides if not self._probe_is_whole(run))
        for run in self.sides:
            if not self.request.cache.has(run.key) and not self._probed_with_its_run(run):
                raise _run_failed(run)
        jobs = self._jobs(needed, probe_memory_budget=self.memory_budget)
        probes = replace(self.plan, runs=needed, cached=(), jobs=jobs, damaged=())
        return MatrixRunner(
            probes,
            self.request.cache,
            timeout_s=self.request.timeout_s,
            finished=lambda key: self.store.has_probe(probe_key(key)),
            parallel=1,  # each probe's child holds the memory budget: one at a time
        )

    def _plain_maps(self) -> tuple[np.ndarray, np.ndarray]:
        maps = [self.request.cache.read_run(run.key).probabilities for run in self.sides]
        assert maps[0] is not None and maps[1] is not None
        return maps[0], maps[1]

    def compare(self) -> LayerProbe:
        """Compare the two stored probes, store the comparison, keep within the budget. A
        probe found damaged while it is read (derived data) is removed, and said in one line:
        the next call probes it again rather than fail on it every time."""
        for run in self.sides:  # a probe's child computes a missing plain run: it may fail
            if not self.request.cache.has(run.key):
                raise _run_failed(run)
            if not self.store.has_probe(probe_key(run.key)):
                raise InputError(run.label, "its layer probe failed: nothing to compare")
        try:
            with (
                self.store.open_probe(probe_key(self.sides[0].key)) as reference,
                self.store.open_probe(probe_key(self.sides[1].key)) as other,
            ):
                comparison, spatial = compare_stored(reference, other)
                final_maps, source = final_maps_of(reference, other, self._plain_maps)
        except UnreadableEntry as error:
            for run in self.sides:
                if str(self.store.probe_path(probe_key(run.key))) == str(error.path):
                    self.store.remove_probe(probe_key(run.key))
            raise InputError(
                error.path, f"{error.problem}; removed, it is probed again on the next run"
            ) from None
        sides = _side(reference.meta), _side(other.meta)
        stored = StoredComparison(self.key, *sides, comparison, spatial, final_maps, source)
        self.store.write_comparison(stored)
        removed = set(self.store.keep_within(self.disk_budget))
        kept = not removed & {probe_key(run.key) for run in self.sides}
        return LayerProbe(stored, tensors_kept=kept, served_from_cache=False)

    def cached_result(self) -> LayerProbe | None:
        stored = self.stored()
        if stored is None:
            return None
        kept = all(self.store.has_probe(probe_key(run.key)) for run in self.sides)
        return LayerProbe(stored, tensors_kept=kept, served_from_cache=True)


def final_maps_of(
    reference: ProbeTensors,
    other: ProbeTensors,
    plain: Callable[[], tuple[np.ndarray, np.ndarray]],
) -> tuple[tuple[np.ndarray, np.ndarray], str]:
    """The maps the output's figures are counted on: the plain runs' when both probes
    computed them bit for bit, else (the probe changed what it measures) the probes' own."""
    exact = all(t.meta.get("final", {}).get("bitwise_equal") is True for t in (reference, other))
    if exact:
        return plain(), "plain runs"
    return (reference.final_map(), other.final_map()), "probe"


def _side(meta: dict[str, Any]) -> dict[str, Any]:
    keep = ("label", "run_key", "probe_key", "config", "final", "wall_time_s", "layers",
            "matching", "artefact", "tensors_from", "unmatched", "unmatched_why")  # fmt: skip
    return {name: meta[name] for name in keep if name in meta}


def _run_failed(run: PlannedRun) -> InputError:
    return InputError(run.label, "its run failed, so there is nothing to probe against")
