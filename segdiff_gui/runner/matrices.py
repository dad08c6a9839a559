"""The standard matrices: the default for ``segdiff run`` and the demo's, for both front ends."""

from __future__ import annotations

from collections.abc import Sequence

from segdiff_gui.core.config import RunConfig

__all__ = ["artefact_configs", "default_configs", "demo_configs", "source_configs"]


def default_configs(gpus: Sequence[str]) -> list[RunConfig]:
    """Batch 1 and 64 on every device."""
    return [RunConfig(device=device, batch=batch) for device in ["cpu", *gpus] for batch in (1, 64)]


def artefact_configs(runtime: str, fixed_batch: int | None) -> list[RunConfig]:
    """An artefact's default matrix: under its own runtime on the CPU, batch 1 and 64, or
    its fixed batch alone where its input fixes one (a ``.tflite`` converted for one image)."""
    batches = (fixed_batch,) if fixed_batch is not None else (1, 64)
    return [RunConfig(runtime=runtime, batch=batch) for batch in batches]


def source_configs(artefact: Sequence[RunConfig]) -> list[RunConfig]:
    """What an artefact's Keras source runs beside it when nothing else is asked: each of the
    artefact's devices and batches under the source's own runtime at its defaults, then the
    exact run (float64), which says which side of each flip is right."""
    same = [
        RunConfig(device=c.device, batch=c.batch, context=c.context, position=c.position)
        for c in artefact
    ]
    return list(dict.fromkeys([*same, RunConfig(precision="float64")]))


def demo_configs(gpus: Sequence[str]) -> list[RunConfig]:
    """Knobs that change the demo's maps even on a 2-core CPU, plus every GPU that is present:
    batch 1 and 64, one intra-op thread, XLA the other way from ``model.predict``'s choice
    (which compiles with XLA where TensorFlow sees a GPU), bfloat16; on GPUs also TF32 off
    and determinism."""
    configs = [
        RunConfig(batch=1),
        RunConfig(batch=64),
        RunConfig(threads=1),
        RunConfig(xla=not gpus),
        RunConfig(precision="mixed_bfloat16"),
    ]
    for gpu in gpus:
        configs += [
            RunConfig(device=gpu, batch=1),
            RunConfig(device=gpu, batch=64),
            RunConfig(device=gpu, tf32=False),
            RunConfig(device=gpu, determinism=True),
        ]
    return configs
