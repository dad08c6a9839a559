"""The layer probe's memory and time on a deep model at 512×512.

A plain network of 56 layers (28 convolutions of 16 channels, each followed by a ReLU layer of
its own) on one 512×512 image: one configuration's activations, every layer's output summed,
are about 0.9 GiB. Measured, each in a fresh process:

- the plain runs' child and the probe's child, peak resident memory (``ru_maxrss`` of the
  process tree);
- the comparison of two stored probes (``LayerProbeSession.compare``), its peak resident
  memory above what the process held before it (Linux's high-water mark, reset just before),
  against the memory budget;
- the probe's time against the plain run of the same configuration (the child's own timers).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

LAYERS, CHANNELS, SIZE = 28, 16, 512
BUDGET = 256 << 20


def _python(code: str, *args: object) -> dict[str, Any]:
    """Run ``code`` (with ``args``) in a fresh interpreter; it prints one JSON line last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", **_environment()},
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _environment() -> dict[str, str]:
    import os

    return dict(os.environ)


def build(work: Path) -> tuple[Path, Path]:
    model, image = work / "deep.keras", work / "deep.png"
    rng = np.random.default_rng(5)
    Image.fromarray(rng.integers(0, 256, (SIZE, SIZE), dtype=np.uint8)).save(image)
    _python(
        f"""
        import json, keras
        keras.utils.set_random_seed(3)
        x = inputs = keras.Input(({SIZE}, {SIZE}, 1))
        for i in range({LAYERS}):
            x = keras.layers.Conv2D({CHANNELS}, 3, padding="same", name=f"conv{{i:02d}}")(x)
            x = keras.layers.Activation("relu", name=f"relu{{i:02d}}")(x)
        out = keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(x)
        keras.Model(inputs, out).save({str(model)!r})
        print(json.dumps({{}}))
        """
    )
    return model, image


_MEASURE = """
import json, resource, sys, time
from pathlib import Path
from segdiff_gui.core.config import parse_config_spec
from segdiff_gui.runner.layers import LayerProbeSession
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache

model, image, cache, budget, step = sys.argv[1:6]
request = MatrixRequest(Path(model), (Path(image),), ResultCache(cache), repeats=1)
session = LayerProbeSession(request, parse_config_spec("device=cpu"),
                            parse_config_spec("device=cpu,precision=bf16"), int(budget))
def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])  # kB
    return 0

# The peak from here on: Linux resets the high-water mark on "5" (imports and planning are
# not the comparison's).
Path("/proc/self/clear_refs").write_text("5")
start = status("VmRSS")
started = time.perf_counter()
if step == "plain":  # in a child of their own, so that the probe's child probes only
    list(session.request.start([]).run())
elif step == "probe":
    list(session.probe_runner().run())
else:
    probe = session.compare()
seconds = time.perf_counter() - started
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
own = status("VmHWM")
print(json.dumps({"children_kib": children, "own_kib": own, "start_kib": start,
                  "seconds": seconds}))
"""


def _step(model: Path, image: Path, cache: Path, step: str) -> dict[str, Any]:
    return _python(_MEASURE, model, image, cache, BUDGET, step)


def measure(work: Path) -> dict[str, float]:
    from segdiff_gui.core.config import parse_config_spec
    from segdiff_gui.runner.layers import LayerProbeSession
    from segdiff_gui.runner.request import MatrixRequest
    from segdiff_gui.storage.cache import ResultCache

    model, image = build(work)
    cache = work / "layers-cache"
    plain = _step(model, image, cache, "plain")
    probe = _step(model, image, cache, "probe")
    compared = _step(model, image, cache, "compare")
    request = MatrixRequest(model, (image,), ResultCache(cache), repeats=1)
    session = LayerProbeSession(
        request, parse_config_spec("device=cpu"), parse_config_spec("device=cpu,precision=bf16")
    )
    stored = session.cached_result()
    assert stored is not None
    activations = sum(4 * int(np.prod(layer.shape)) for layer in stored.comparison.layers)
    walls = [float(side["wall_time_s"]) for side in (stored.stored.reference, stored.stored.other)]
    plain_walls = [
        cache_run.provenance.wall_time_s or 0.0
        for cache_run in (
            ResultCache(cache).read_run(run.key, with_map=False) for run in session.sides
        )
    ]
    return {
        "layers": len(stored.comparison.layers),
        "activations_mib": activations / 2**20,
        "plain_child_mib": plain["children_kib"] / 1024,
        "probe_child_mib": probe["children_kib"] / 1024,
        "compare_mib": (compared["own_kib"] - compared["start_kib"]) / 1024,
        "budget_mib": BUDGET / 2**20,
        "compare_s": compared["seconds"],
        "probe_ratio": sum(walls) / sum(plain_walls),
        "probe_s": sum(walls) / 2,
        "plain_s": sum(plain_walls) / 2,
        "bitwise": all(
            side["final"]["bitwise_equal"]
            for side in (stored.stored.reference, stored.stored.other)
        ),
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(measure(Path(folder)), indent=2))
