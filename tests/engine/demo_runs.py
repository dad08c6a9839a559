"""The demo's runs that the runtime, exact-run and TF32-emulation tests read, computed once
for all three, on the demo's first four images, by the real ``segdiff run``: one child per set
of process-level settings of the union, where each module alone started its own children for
the same runtimes' defaults (TensorFlow's, JAX's and PyTorch's: the exact run, the emulation
and most knobs are run-time knobs, computed in their runtime's plain child). Batch 1 computes
the first image alone and batch 2 fills with the second, so a run's key is the one its module
would compute on the images it names. Each module reads a copy of its own runs only
(:func:`module_runs`), its cache then what it was when it computed them itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.storage import ResultCache
from tests.conftest import copy_runs, segdiff

IMAGES = 4  # of the demo's sixteen: enough for a batch of four

# test_runtimes.py: one child per runtime's defaults, and one with every process-level knob
# changed at once: each knob's read-back shows it took effect, at the cost of two children per
# runtime.
RUNTIMES = {
    "tf": "batch=1",
    "jax": "runtime=jax",
    "jax xla": "runtime=jax,xla=on",
    "jax eager": "runtime=jax,xla=off",
    "jax b4": "runtime=jax,batch=4",
    "jax bf16": "runtime=jax,precision=bf16,xla=on",
    "jax keep": "runtime=jax,precision=bf16,keep_float32=foreground,xla=on",
    "jax fp16": "runtime=jax,precision=fp16,xla=on",
    "jax knobs": "runtime=jax,tf32=off,threads=1,determinism=on",
    "torch": "runtime=torch",
    "torch b4": "runtime=torch,batch=4",
    "torch bf16": "runtime=torch,precision=bf16",
    "torch keep": "runtime=torch,precision=bf16,keep_float32=foreground",
    "torch fp16": "runtime=torch,precision=fp16",
    "torch knobs": "runtime=torch,tf32=off,threads=1,determinism=on,onednn=off",
    "torch onednn": "runtime=torch,onednn=on",
    "openvino": "runtime=openvino",
    "openvino b4": "runtime=openvino,batch=4",
    "openvino f32": "runtime=openvino,inference_precision=f32",
}

# test_exact.py: the exact reference under each runtime that runs the Keras model itself,
# beside the float32 run; JAX without XLA (its float64 XLA compilation of the demo takes a
# minute on two cores).
EXACT = {
    "tf": "batch=1",
    "fp64": "precision=fp64",
    "jax fp64": "runtime=jax,precision=fp64,xla=off",
    "torch fp64": "runtime=torch,precision=fp64",
}

# test_tf32_emulation.py: the demo's first image (the second fills batch 2).
TF32 = {
    "base": "batch=1",
    "b2": "batch=2",
    "xla": "xla=on",
    "b2_xla": "batch=2,xla=on",
    "emulated": "emulate=tf32",
    "emulated_b2_xla": "emulate=tf32,batch=2,xla=on",
    "jax": "runtime=jax",
    "jax emulated": "runtime=jax,emulate=tf32",
    "jax emulated eager": "runtime=jax,emulate=tf32,xla=off",
    "torch": "runtime=torch",
    "torch emulated": "runtime=torch,emulate=tf32",
}


@dataclass(frozen=True)
class SharedRuns:
    """The union's cache (read only: a test copies what it changes) and what ``segdiff run
    --json`` said of each run, by its configuration."""

    cache: ResultCache
    entries: dict[RunConfig, dict[str, Any]]


def compute(model: Path, images: list[Path], root: Path) -> None:
    """Every module's specs in one ``segdiff run`` into ``root/cache``; its JSON beside."""
    specs = list(dict.fromkeys([*RUNTIMES.values(), *EXACT.values(), *TF32.values()]))
    configs = [word for spec in specs for word in ("--config", spec)]
    result = segdiff("run", model, *images[:IMAGES], *configs, "--repeats", "1",
                     "--cache", root / "cache", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    (root / "run.json").write_text(result.stdout)


def shared_runs(root: Path) -> SharedRuns:
    runs = json.loads((root / "run.json").read_text())["runs"]
    specs = list(dict.fromkeys([*RUNTIMES.values(), *EXACT.values(), *TF32.values()]))
    assert len(runs) == len(specs)  # in the order asked for
    entries = {parse_config_spec(spec): run for spec, run in zip(specs, runs, strict=True)}
    cache = ResultCache(root / "cache")
    for config, run in entries.items():  # paired by position: each is its spec's run
        assert cache.read_run(run["key"], with_map=False).run_config == config, run
    return SharedRuns(cache, entries)


def module_runs(
    shared: SharedRuns, root: Path, specs: dict[str, str]
) -> tuple[ResultCache, dict[str, dict[str, Any]]]:
    """A cache at ``root`` holding ``specs``' runs alone, and each one's JSON entry by name."""
    entries = {name: shared.entries[parse_config_spec(spec)] for name, spec in specs.items()}
    cache = copy_runs(shared.cache, root, {entry["key"] for entry in entries.values()})
    return cache, entries
