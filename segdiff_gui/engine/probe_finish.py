"""What every layer probe shares (Keras layers or a converted runtime's tensors): the plain
run's map it is checked on, and its end: the probe's own final map, checked bit for bit
against the plain run's, stored with its meta."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import PlannedRun
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.engine.outputs import to_probabilities
from segdiff_gui.storage.probe_files import ProbeWriter

if TYPE_CHECKING:
    from segdiff_gui.engine.probe_context import ProbeContext

__all__ = ["finish_probe", "plain_map"]


def plain_map(runner: ProbeContext, run: PlannedRun) -> np.ndarray:
    """The plain run's map the probe is checked on: the cache's, or, where none is cached,
    computed here first by the run's own forward pass and written to the cache as any run's."""
    try:
        plain = runner.cache.read_run(run.key).probabilities
    except KeyError:
        record = runner.execute(run)
        runner.cache.write_run(record)
        plain = record.probabilities
    assert plain is not None
    return plain


def finish_probe(
    runner: ProbeContext,
    run: PlannedRun,
    writer: ProbeWriter,
    key: str,
    *,
    raw: np.ndarray,
    plain: np.ndarray,
    started: float,
    **meta: Any,
) -> None:
    """Store the probe ``key`` of ``run`` whole: ``raw`` is the probe's output for the target,
    ``plain`` the plain run's map, ``meta`` what this kind of probe adds."""
    wall = time.perf_counter() - started
    loaded = runner.model  # a Keras model, or the user's artefact as it is
    name = loaded.output_names[runner.output_index]
    probabilities, _ = to_probabilities(
        loaded.path,
        name,
        raw,
        runner.job.output,
        runner.backend.quantized_output(run.computed),
    )
    if probabilities.shape != plain.shape:
        raise InputError(run.label, "the probe's final map has another shape than its run's")
    check = compare_maps(plain, probabilities)
    writer.finish(
        {
            "run_key": run.key,
            "probe_key": key,
            "label": run.label,
            "config": run.config.to_dict(),
            "layers": writer.count,
            **meta,
            "final": {
                "bitwise_equal": check.bitwise_equal,
                "differing_pixels": check.differing_pixels,
                "max_ulp": check.max_ulp,
            },
            "wall_time_s": wall,
            "timestamp": local_timestamp(),
        },
        probabilities,
    )
