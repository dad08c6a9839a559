"""Does summarising a sweep stay flat in memory as the test set grows?

Run: ``python -m tests.benchmarks.bench_sweep``. Writes synthetic runs (3 configurations × 2 repeats
of 512×512 float32 maps per image, with ground truth) into a temporary cache for 16, 64 and
256 images, then summarises each set as ``segdiff sweep`` does and prints the time, the peak of
Python-visible allocations during the summary (tracemalloc: numpy arrays included) and the
bytes of maps that set holds on disk. Only a few numbers per image should be kept.
"""

from __future__ import annotations

import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.runner.sweeps import summarise_sweep, sweep_groups
from segdiff_gui.storage import ResultCache
from tests.benchmarks.synthetic import record

SIZE = 512
CONFIGS = (RunConfig(), RunConfig(batch=16), RunConfig(precision="mixed_bfloat16"))
REPEATS = 2


def populate(root: Path, images: int) -> TruthFolder:
    from PIL import Image

    cache = ResultCache(root / "cache")
    masks = root / "masks"
    masks.mkdir()
    rng = np.random.default_rng(images)
    y, x = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    for index in range(images):
        name = f"img_{index:04d}.png"
        logits = 6 * np.sin(9 * x + index + 3 * np.cos(7 * y))
        base = (1 / (1 + np.exp(-logits))).astype(np.float32)
        Image.fromarray(((base > 0.5) * 255).astype(np.uint8)).save(masks / name)
        for config in CONFIGS:
            for repeat in range(REPEATS):
                noise = rng.normal(0, 1e-6 if config.batch > 1 else 1e-3, base.shape)
                values = base if config == RunConfig() else (base + noise).astype(np.float32)
                cache.write_run(record(name, config, repeat, values))
    return TruthFolder(masks)


def main() -> None:
    print(f"{'images':>7} {'summary s':>10} {'peak MiB':>9} {'maps on disk MiB':>17}")
    for images in (16, 64, 256):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            truth = populate(root, images)
            cache = ResultCache(root / "cache")
            groups = sweep_groups(cache.records())
            tracemalloc.start()
            started = time.perf_counter()
            summary = summarise_sweep(cache, groups, cutoff=0.5, truth=truth)
            seconds = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            raw = images * len(CONFIGS) * REPEATS * SIZE * SIZE * 4
            assert len(summary.images) == images
            print(f"{images:>7} {seconds:>10.2f} {peak / 2**20:>9.1f} {raw / 2**20:>17.0f}")


if __name__ == "__main__":
    main()
