"""The converted runtimes on the demo: what a conversion costs (its time and the
artefact's size, on fresh caches) and what inference costs per image under each runtime
against Keras on TensorFlow, over the demo's 16 images at batch 1 (each run's forward pass
as its child timed it; the median over the images, so a first call's set-up is left out)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

CONVERTED = ("litert", "litert-fp16", "litert-dynamic-int8", "litert-int8", "onnxruntime")


def _run(work: Path, name: str, configs: list[Any], sweep: bool) -> list[Any]:
    from segdiff_gui.resources import demo_images, demo_model
    from segdiff_gui.runner.matrix import MatrixRunner
    from segdiff_gui.runner.plan import plan_matrix
    from segdiff_gui.storage import ResultCache

    cache = ResultCache(work / name)
    plan = plan_matrix(demo_model(), demo_images(), configs, cache=cache, repeats=1, sweep=sweep)
    messages = list(MatrixRunner(plan, cache).run())
    failed = [m for m in messages if type(m).__name__ in ("RunFailed", "ChildFatal")]
    if failed:
        raise RuntimeError(f"benchmark runs failed: {failed[0]}")
    return [cache.read_run(run.key, with_map=False) for run in plan.runs]


def measure(work: Path, attempts: int = 3) -> dict[str, dict[str, float]]:
    from segdiff_gui.core.config import RunConfig

    converted = [RunConfig(runtime=name) for name in CONVERTED]
    seconds: dict[str, list[float]] = {name: [] for name in CONVERTED}
    size: dict[str, float] = {}
    for attempt in range(attempts):
        for record in _run(work, f"convert-{attempt}", converted, sweep=False):
            provenance = record.provenance.to_dict()  # the conversion's own facts
            seconds[provenance["runtime"]].append(float(provenance["conversion_seconds"]))
            size[provenance["runtime"]] = float(provenance["conversion_bytes"])
    inference: dict[str, list[float]] = {}
    for record in _run(work, "sweep", [RunConfig(), *converted], sweep=True):
        runtime = record.provenance.runtime
        inference.setdefault(runtime, []).append(record.provenance.wall_time_s or 0.0)
    return {
        name: {
            "conversion_s": statistics.median(seconds[name]) if name in seconds else 0.0,
            "bytes": size.get(name, 0.0),
            "inference_ms": 1000 * statistics.median(times),
            "images": float(len(times)),
        }
        for name, times in inference.items()
    }
