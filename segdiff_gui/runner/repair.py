"""Precision repair between a reduced precision and its float32 reference: the
layer probe blames the layers, then rounds of trials (each a cached run with layers kept in
float32, a round's trials in one child) find a small set that brings the flips within the
bound. Front ends drive :meth:`RepairSession.runners` like matrices."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.defaults import (
    DEFAULT_CUTOFF,
    DEFAULT_LAYER_DISK_BUDGET,
    DEFAULT_LAYER_MEMORY_BUDGET,
)
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.repair import RepairResult, RepairSearch, Trial, blame_order
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.runner.layers import LayerProbe, LayerProbeSession
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.request import MatrixRequest

__all__ = ["RepairSession", "reference_of"]


def reference_of(config: RunConfig) -> RunConfig:
    """The float32 configuration a reduced precision is repaired against: the same knobs."""
    return replace(config, precision="float32", keep_float32=())


class RepairSession:
    """Repair ``target`` (a reduced precision) against ``reference`` (default: the same
    configuration in float32) at ``cutoff``, to at most ``bound`` flips."""

    def __init__(
        self,
        request: MatrixRequest,
        target: RunConfig,
        *,
        reference: RunConfig | None = None,
        cutoff: float = DEFAULT_CUTOFF,
        bound: int = 0,
        memory_budget: int = DEFAULT_LAYER_MEMORY_BUDGET,
        disk_budget: int = DEFAULT_LAYER_DISK_BUDGET,
    ) -> None:
        if (runtime := RUNTIMES[target.runtime]).conversion:
            raise InputError(
                "repair",
                f"{target.label()} runs a converted model ({runtime.title}): precision repair "
                "keeps Keras layers in float32 under a mixed-precision policy, and a "
                "conversion's own quantization is not repaired; the layer probe shows where "
                "it moves the map",
            )
        if not target.reduced_precision:
            raise InputError(
                "repair",
                f"{target.label()} computes in {target.precision} already; repair a reduced "
                "precision (precision=bf16 or precision=fp16)",
            )
        if bound < 0:
            raise InputError("bound", f"must be 0 or more flips, not {bound}")
        self.target = replace(target, keep_float32=())
        self.reference = reference or reference_of(target)
        self.request = replace(request, repeats=1, sweep=False, strict=True)
        self.cutoff, self.bound = cutoff, bound
        self.probe_session = LayerProbeSession(
            self.request, self.reference, self.target, memory_budget, disk_budget
        )
        self.probe: LayerProbe | None = None
        self.result: RepairResult | None = None

    def runners(self) -> Iterator[tuple[str, MatrixRunner]]:
        """What to drive, in order, each to its end before the next is asked for: the two
        plain runs, the probes, then each round of trials. :attr:`result` holds the answer."""
        session = self.probe_session
        probe = session.cached_result()
        if probe is None:
            yield "runs", session.plain_runner()
            yield "layer probes", session.probe_runner()
            probe = session.compare()
        self.probe = probe
        before_map = probe.stored.final_maps
        final = compare_maps(*before_map, cutoff=self.cutoff)
        before = Trial((), final.flips, final.max_ulp, final.differing_pixels, self.target.label())
        search = RepairSearch(blame_order(probe.comparison), self.bound)
        search.trials[()] = before
        if before.passes(self.bound):
            search.phase = "done"
            search.kept = ()
        reference_map = self._map(session.sides[0].key)
        while True:
            wanted = search.next_trials()
            if not wanted:
                break
            configs = [replace(self.target, keep_float32=kept) for kept in wanted]
            plan = self.request.with_configs(configs).plan()
            plan.check_storable()
            key_of = {run.config: run.key for run in plan.runs}
            runner = MatrixRunner(plan, self.request.cache, timeout_s=self.request.timeout_s)
            yield f"round {search.rounds + 1}: {len(configs)} trials", runner
            if runner.cancelled:
                raise InputError("repair", "cancelled")
            results = []
            for kept, config in zip(wanted, configs, strict=True):
                try:
                    trial_map = self._map(key_of[config])
                except KeyError:  # the run failed: no map, and no pass
                    results.append(Trial(kept, None, label=config.label()))
                    continue
                compared = compare_maps(reference_map, trial_map, cutoff=self.cutoff)
                results.append(
                    Trial(
                        kept,
                        compared.flips,
                        compared.max_ulp,
                        compared.differing_pixels,
                        config.label(),
                    )
                )
            search.record(results)
        self.result = RepairResult(
            precision=self.target.precision,
            reference_label=self.reference.label(),
            before=before,
            after=search.best(),
            bound=self.bound,
            cutoff=self.cutoff,
            trials=tuple(t for kept, t in search.trials.items() if kept),
            rounds=search.rounds,
            order=tuple(search.order),
        )
        target_run, reference_run = (run.key for run in reversed(session.sides))
        session.store.write_repair(target_run, reference_run, self.result)

    def _map(self, key: str) -> np.ndarray:
        """The cached map of the run ``key`` (KeyError if it did not finish)."""
        probabilities = self.request.cache.read_run(key).probabilities
        assert probabilities is not None
        return probabilities
