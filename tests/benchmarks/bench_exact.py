"""The exact reference and emulated TF32 on the demo: what the float64 forward pass
and the emulation (``emulate=tf32``) cost against the float32 run's, all in one child
(precision and the emulation are switched at run time), at batch 1 and 8 over
the demo's 16 images (each run's forward pass as its child timed it; the median over the
images, so a first call's compilation is left out), and how far every float32 map lies from
the exact one (max |Δ| and max ULP measured at the exact value, over the 16 images)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np

BATCHES = (1, 8)


def measure(work: Path) -> dict[str, Any]:
    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.resources import demo_images, demo_model
    from segdiff_gui.runner.matrix import MatrixRunner
    from segdiff_gui.runner.plan import plan_matrix
    from segdiff_gui.storage import ResultCache

    configs = [
        RunConfig(batch=batch, precision=precision, emulate=emulate)
        for batch in BATCHES
        for precision, emulate in (("float32", "off"), ("float64", "off"), ("float32", "tf32"))
    ]
    cache = ResultCache(work / "exact")
    plan = plan_matrix(demo_model(), demo_images(), configs, cache=cache, repeats=1, sweep=True)
    assert len(plan.jobs) == 1, "precision, emulation, batch: switched at run time, one child"
    messages = list(MatrixRunner(plan, cache).run())
    failed = [m for m in messages if type(m).__name__ in ("RunFailed", "ChildFatal")]
    if failed:
        raise RuntimeError(f"benchmark runs failed: {failed[0]}")
    seconds: dict[tuple[int, str], list[float]] = {}  # (batch, float32 | float64 | tf32)
    maps: dict[tuple[int, str, str], np.ndarray] = {}
    for run in plan.runs:
        record = cache.read_run(run.key)
        config = record.run_config
        kind = "tf32" if config.emulate == "tf32" else config.precision
        seconds.setdefault((config.batch, kind), []).append(record.provenance.wall_time_s or 0.0)
        maps[config.batch, kind, record.target_hash] = record.probabilities
    worst_delta, worst_ulp = 0.0, 0.0
    for (_batch, kind, target), values in maps.items():
        if kind != "float32":
            continue
        exact = maps[1, "float64", target]
        step = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        delta = np.abs(values.astype(np.float64) - exact)
        worst_delta = max(worst_delta, float(delta.max()))
        worst_ulp = max(worst_ulp, float((delta / step).max()))
    return {
        "ms": {key: 1000 * statistics.median(times) for key, times in seconds.items()},
        "images": len(seconds[1, "float32"]),
        "max_delta": worst_delta,
        "max_ulp": worst_ulp,
    }
