"""Synthetic probability maps and stored runs for the benchmarks (no TensorFlow needed)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.storage import RunRecord
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import expected_key

__all__ = ["digest", "maps", "record"]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def maps(size: int) -> list[np.ndarray]:
    """Smooth maps with soft edges (the reference), then the kinds of differences devices
    make: a few 1-ULP changes (batch), small noise (GPU) and truncated mantissas (bfloat16)."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:size, 0:size] / size
    logits = 6 * np.sin(9 * x + 3 * np.cos(7 * y)) + rng.normal(0, 1, (size, size))
    reference = (1 / (1 + np.exp(-logits))).astype(np.float32)
    few_ulps = np.nextafter(reference, np.float32(1)) * (rng.random(reference.shape) < 0.05)
    batch = np.where(few_ulps > 0, few_ulps, reference).astype(np.float32)
    gpu = np.clip(reference + rng.normal(0, 1e-4, reference.shape), 0, 1).astype(np.float32)
    bf16 = (reference.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return [reference, batch, gpu, bf16]


def record(image: str, config: RunConfig, repeat: int, values: np.ndarray) -> RunRecord:
    """A stored sigmoid run of ``synthetic.keras`` on ``image``, holding ``values``."""
    label = f"{config.label()} r{repeat}"
    unkeyed = RunRecord(
        key="",
        label=label,
        config=config.to_dict(),
        repeat=repeat,
        model_name="synthetic.keras",
        model_hash=digest("model"),
        target_name=image,
        target_hash=digest(image),
        batch_hashes=[digest(image)] * config.batch,
        batch_names=[image] * config.batch,
        preprocessing=Preprocessing().to_dict(),
        output={"output": None, "activation": "none"},
        output_name="mask",
        kind="sigmoid",
        raw_output_shape=[config.batch, *values.shape, 1],
        map_shape=values.shape,
        provenance=Provenance.from_dict({"hostname": "bench"}),
        probabilities=values,
    )
    return replace(unkeyed, key=expected_key(unkeyed))
