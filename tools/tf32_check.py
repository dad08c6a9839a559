"""TF32 predicted on a CPU against TF32 measured on a GPU (issue 36), from a cache that
tools/gpu_check.sh filled: ``python tools/tf32_check.py CACHE [CUTOFF]``.

Predicted: each runtime's ``emulate=tf32`` run on the CPU against its plain float32 run.
Measured: each runtime's GPU run with TF32 on against its run with TF32 off (TensorFlow's
``enable_tensor_float_32_execution``, JAX's default matmul precision "tensorfloat32" against
"highest", PyTorch's ``allow_tf32``), and the GPU's TF32 map against the same runtime's
emulated one. Each
row: pixels that differ, max ULP, max |Δ| and flips at the cutoff. Without a GPU run it
says so and prints the prediction alone.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from segdiff_gui.core.analysis import DEFAULT_CUTOFF, compare_maps
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.floatfmt import as_float32, format_float32
from segdiff_gui.storage import ResultCache


def main(argv: list[str]) -> int:
    cache = ResultCache(argv[0])
    cutoff = as_float32(float(argv[1])) if len(argv) > 1 else DEFAULT_CUTOFF
    keys = {}
    for record in cache.records():  # without their maps: only the first repeat's is read
        config = RunConfig.from_dict(record.config)
        if record.repeat == 0 and config.batch == 1:
            keys.setdefault(config, record.key)
    maps = {config: cache.read_run(key).probabilities for config, key in keys.items()}
    rows = []
    for runtime in sorted({config.runtime for config in maps}):
        plain = RunConfig(runtime=runtime)
        emulated = RunConfig(runtime=runtime, emulate="tf32")
        if plain in maps and emulated in maps:
            rows.append((f"predicted: emulated TF32 vs float32 (cpu, {runtime})", plain, emulated))
        gpus = sorted(
            {c for c in maps if c.is_gpu and c.tf32 and replace(c, tf32=False) in maps},
            key=RunConfig.to_spec,
        )
        for on in gpus:
            if on.runtime != runtime or replace(on, device="cpu") != plain:
                continue  # a runtime's plain b1 GPU run only, not one with other knobs moved
            name = f"{runtime} {on.device}"
            rows.append((f"measured: {name} TF32 on vs off", replace(on, tf32=False), on))
            if emulated in maps:
                rows.append((f"emulated (cpu) vs measured TF32 on ({name})", emulated, on))
    measured = any(title.startswith("measured") for title, _, _ in rows)
    if not rows:
        print(f"{argv[0]}: no emulated run and no GPU TF32 pair to compare")
        return 1
    at = format_float32(cutoff)
    print(f"{'':58} {'differing':>10} {'max ULP':>10} {'max |Δ|':>10} {'flips @ ' + at:>12}")
    for title, first, second in rows:
        figure = compare_maps(maps[first], maps[second], cutoff=cutoff)
        print(
            f"{title:58} {figure.differing_pixels:>10,} {figure.max_ulp:>10,} "
            f"{figure.max_abs:>10.3g} {figure.flips:>12,}"
        )
    if not measured:
        print("measured: no GPU run here (a dry run on the CPU): the prediction alone")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
