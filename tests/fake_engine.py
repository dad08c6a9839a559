"""A fake engine child for runner, CLI, API and window tests: it speaks the real child protocol
(a job as JSON on stdin, one message per line on stdout) and writes real records through
storage, but computes no model. Started in place of ``python -m segdiff_gui.engine`` through
the one seam there is, :func:`segdiff_gui.runner.child.engine_command` (see
:func:`engine_command`); ``python tests/fake_engine.py cli ARGS…`` is ``segdiff ARGS…``
with the fake in place, ``… gui ARGS…`` is ``segdiff-gui ARGS…``, and
``python tests/fake_engine.py kernel -f FILE`` a Jupyter kernel whose ``segdiff_gui.run``
starts the fake.

Its map of a run is a function of the target image and of the run's configuration, so that
a test sees what a real child shows: repeats bitwise equal, a configuration that differs from
the reference by a few ULPs at some pixels, a bfloat16 or float16 run that flips pixels, a
GPU that is absent. It imports no runtime: a child starts in a tenth of a second.

Faults are asked for in the child's environment (``MatrixRunner(child_env=…)``, or the
test's own) by the label of the run they strike:

- ``FAKE_ENGINE_CRASH_ON``: the child aborts (SIGABRT) as that run starts;
- ``FAKE_ENGINE_CRASH_AFTER_WRITE``: it aborts once that run is written;
- ``FAKE_ENGINE_HANG_ON``: it sleeps an hour in that run;
- ``FAKE_ENGINE_DIE_AT_START``: a flag file's path; the first child (the file is absent)
  kills itself with SIGKILL before any run, as the OOM killer does while a model loads;
- ``FAKE_ENGINE_FAIL_ON_IMAGE``: every run whose target is the image of that name fails (as
  a run out of memory on one large image does), the child going on with the others;
- ``FAKE_ENGINE_SLOW_FIRST_S``: the first run of each batch size takes this long, saying
  "compiling kernels" every ``FAKE_ENGINE_HEARTBEAT_S`` meanwhile;
- ``FAKE_ENGINE_BATCH_S``: each batch's forward pass takes this long (a sweep at a pace a
  person can watch, for a look at the window mid-sweep).

A model inspection (``inspect``) answers a fully convolutional model of one channel, or of
``FAKE_ENGINE_INPUT_CHANNELS`` channels (an RGB model: 3).

The fake's model takes any image as it is, unless ``FAKE_ENGINE_MODEL_INPUT`` gives it an
input, ``HxWxC`` (``16x16x3``): every image of a run's batch is then made that input with the
job's preprocessing by core's own ``prepare_input``, and an image it cannot take fails the run
as the real child fails it, an input error with its fix (``color=rgb``, ``resize=bilinear``).

A device probe (``probe RUNTIME``) answers at once, unless:

- ``FAKE_ENGINE_PROBE_MEET``: a folder; the probe writes its runtime's name there and answers
  only once another probe has written its own (within a minute, else it exits unanswered):
  probes asked one after another never meet;
- ``FAKE_ENGINE_PROBE_HANG``: set, the probe sleeps an hour before answering.

What Keras safe mode refuses, the fake refuses as the real child does, with the same
``ChildFatal`` (core/trust.py's words and fix), to an inspection and to a run: a SavedModel
folder, and a ``.keras`` file whose config holds a Lambda layer, unless the model is trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.environment import KEYED_VARIABLES
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import EngineJob, PlannedRun
from segdiff_gui.core.preprocess import prepare_input
from segdiff_gui.core.protocol import (
    BatchProgress,
    ChildFatal,
    ModelAnswer,
    ProbeAnswer,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.core.trust import untrusted_keras_code, untrusted_saved_model
from segdiff_gui.io.images import read_image
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.version import __version__

__all__ = ["FAKE_VERSION", "engine_command", "fake_map"]

FAKE_VERSION = "0.0-fake"
_SCRIPT = Path(__file__).resolve()
_INHERITED = {name: os.environ[name] for name in KEYED_VARIABLES if name in os.environ}


def engine_command(words: str) -> list[str]:
    """What :func:`segdiff_gui.runner.child.engine_command` returns with the fake in place."""
    return [sys.executable, str(_SCRIPT), *words.split()]


# the map ------------------------------------------------------------------------------------
def _seed(*parts: object) -> int:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _gray(image: np.ndarray) -> np.ndarray:
    values = image.astype(np.float64)
    if values.ndim == 3:
        values = values[..., :3].mean(axis=-1)
    span = float(values.max() - values.min()) or 1.0
    return (values - values.min()) / span


def fake_map(image: np.ndarray, model_hash: str, run: PlannedRun) -> np.ndarray:
    """The fake's float32 sigmoid map of ``image`` under ``run``: the reference map (batch 1,
    every knob at its default) is a smooth function of the image and the model's hash; any
    other configuration moves a few hundred pixels by a few ULPs (as batching or threads
    reorder sums), and a reduced precision rounds every value to its mantissa (and flips
    pixels near 0.5). A repeat computes the same map: the fake is deterministic. The exact
    run (precision=float64) is the same smooth function in float64, so the reference's map is
    it correctly rounded to float32."""
    gray = _gray(image)
    slope = 6.0 + (_seed(model_hash) % 1000) / 500.0
    exact = 1.0 / (1.0 + np.exp(-(gray.astype(np.float64) - 0.5) * slope))
    config = run.computed
    if config.is_exact:
        return np.clip(exact, 0, 1).astype(config.map_dtype)
    base = exact.astype(np.float32)
    moved = {
        name: value
        for name, value in config.to_dict().items()
        if name not in ("precision", "keep_float32", "repeat_scope", "device")
        and value != type(config)().to_dict().get(name)
    }
    if moved or config.is_gpu:
        rng = np.random.default_rng(_seed(model_hash, sorted(moved.items()), config.device))
        count = max(1, base.size // 50)
        flat = base.reshape(-1).copy()
        where = rng.choice(flat.size, size=count, replace=False)
        steps = rng.integers(-4, 5, size=count)
        for index, step in zip(where, steps, strict=True):
            for _ in range(abs(int(step))):
                flat[index] = np.nextafter(flat[index], np.float32(1 if step > 0 else 0))
        base = flat.reshape(base.shape)
    if config.precision == "mixed_bfloat16" and not config.keep_float32:
        bits = base.view(np.uint32) + np.uint32(0x8000)
        base = (bits & np.uint32(0xFFFF0000)).view(np.float32)
    elif config.precision == "mixed_float16" and not config.keep_float32:
        base = base.astype(np.float16).astype(np.float32)
    return np.clip(base, 0, 1).astype(np.float32)


# the child ----------------------------------------------------------------------------------
class _Channel:
    """The private stdout the real child keeps (engine/protocol.Channel), without its fd
    juggling: the fake writes nothing else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def send(self, message: Any) -> None:
        with self._lock:
            sys.stdout.write(message.to_json() + "\n")
            sys.stdout.flush()


def _facts(runtime: str) -> dict[str, Any]:
    return {
        "segdiff_version": __version__,
        "runtime": runtime,
        "runtime_version": FAKE_VERSION,
        **({"tf_version": FAKE_VERSION} if runtime == "tensorflow" else {}),
        "keras_version": FAKE_VERSION,
        "numpy_version": np.__version__,
        "python_version": sys.version.split()[0],
        "hostname": socket.gethostname(),
        "process_id": os.getpid(),
        "cpu_model": "fake CPU",
        "environment": dict(_INHERITED),
        "timestamp": local_timestamp(),
    }


_CPU = {
    "name": "cpu",
    "tf_name": "/physical_device:CPU:0",
    "type": "CPU",
    "description": "fake CPU",
    "compute_capability": [],
}


def _model_answer(channels: int) -> ModelAnswer:
    """A fully convolutional model of one sigmoid output: its map is its image's size."""
    return ModelAnswer(
        "keras",
        [None, None, None, channels],
        [{"name": "mask", "shape": [None, None, None, 1], "dtype": "float32"}],
        ["sigmoid"],
        ["float32"],
    )


def _safe_mode_refusal(model_path: str, trust: bool) -> ChildFatal | None:
    """What the real child says of a model Keras safe mode refuses to load, or None."""
    path = Path(model_path)
    refusal: InputError | None = None
    if trust:
        return None
    if path.is_dir():
        refusal = untrusted_saved_model(path)
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            config = archive.read("config.json") if "config.json" in names else b""
        if b'"Lambda"' in config:
            refusal = untrusted_keras_code(path)
    if refusal is None:
        return None
    return ChildFatal(str(refusal.path), refusal.problem, fix=refusal.fix)


def _model_input() -> tuple[int, int, int] | None:
    """The input ``FAKE_ENGINE_MODEL_INPUT`` gives the fake's model (None: any image)."""
    given = os.environ.get("FAKE_ENGINE_MODEL_INPUT")
    if not given:
        return None
    height, width, channels = (int(side) for side in given.split("x"))
    return height, width, channels


def _refused_input(job: EngineJob, run: PlannedRun) -> InputError | None:
    """What the real child says of a batch image its model cannot take, as it says it."""
    shape = _model_input()
    if shape is None:
        return None
    for index in run.batch:
        image = job.images[index]
        try:
            prepare_input(read_image(image.path), job.preprocessing, *shape, image.path)
        except InputError as error:
            return error
    return None


def _fault(name: str, label: str) -> bool:
    wanted = os.environ.get(name)
    return bool(wanted) and wanted in label


def _record(job: EngineJob, run: PlannedRun, probabilities: np.ndarray, wall: float) -> RunRecord:
    images = job.images
    config = run.computed
    provenance: dict[str, Any] = {
        **_facts(config.runtime),
        "device": "cpu:0",
        "device_requested": config.device,
        "device_description": "fake CPU",
        "weights_device": "cpu:0",
        "xla": config.xla,
        "compute_dtype": config.precision.removeprefix("mixed_"),
        "input_batch_shape": [len(run.batch), *probabilities.shape, 1],
        "model_path": str(Path(job.model_path).resolve()),
        "model_format": "keras",
        "target_path": str(Path(images[run.target].path).resolve()),
        "target_input": "an image, preprocessed",
        "trust_model": job.trust_model,
        "wall_time_s": wall,
    }
    if config.runtime == "tensorflow":
        provenance["onednn_enabled"] = bool(run.in_effect.to_dict().get("onednn", config.onednn))
    if in_effect := run.in_effect.to_dict():
        provenance["defaults_in_effect"] = in_effect
    if job.source is not None:
        provenance["source_model"] = job.source.to_dict()
    return RunRecord(
        key=run.key,
        label=run.label,
        config=run.config.to_dict(),
        repeat=run.repeat,
        model_name=Path(job.model_path).name,
        model_hash=job.model_hash,
        target_name=images[run.target].name,
        target_hash=images[run.target].hash,
        batch_hashes=[images[i].hash for i in run.batch],
        batch_names=[images[i].name for i in run.batch],
        preprocessing=job.preprocessing.to_dict(),
        output=job.output.to_dict(),
        output_name="mask",
        kind="sigmoid",
        raw_output_shape=[len(run.batch), *probabilities.shape, 1],
        map_shape=probabilities.shape,
        provenance=Provenance.from_dict(provenance),
        probabilities=probabilities,
        batch_position=run.batch_position,
    )


def _slow_first_call(channel: _Channel, run: PlannedRun, compiled: set[int]) -> None:
    slow = float(os.environ.get("FAKE_ENGINE_SLOW_FIRST_S", "0") or 0)
    if not slow or run.config.batch in compiled:
        return
    compiled.add(run.config.batch)
    interval = float(os.environ.get("FAKE_ENGINE_HEARTBEAT_S", "2"))
    started = time.monotonic()
    while (waited := time.monotonic() - started) < slow:
        time.sleep(min(interval, slow - waited))
        channel.send(BatchProgress(run.key, 3, 4, f"compiling kernels ({waited:.0f} s so far)"))


def _run(channel: _Channel) -> int:
    job = EngineJob.from_dict(json.loads(sys.stdin.read()))
    flag = os.environ.get("FAKE_ENGINE_DIE_AT_START")
    if flag and not os.path.exists(flag):
        with contextlib.suppress(OSError):  # a flag that cannot be made: every child dies
            Path(flag).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    if refused := _safe_mode_refusal(job.model_path, job.trust_model):
        channel.send(refused)
        return 3  # as the real child exits on an input error
    cache = ResultCache(job.cache_root)
    decoded: dict[int, np.ndarray] = {}
    compiled: set[int] = set()
    answered = False
    last_batch: object = None  # a sweep's batch is computed once for the targets it holds
    written: RunFinished | None = None
    for run in job.runs:
        channel.send(RunStarted(run.key, run.label))
        if _fault("FAKE_ENGINE_CRASH_ON", run.label):
            os.abort()  # the run before it stored, not yet said: the runner finds it stored
        # As the real child's writer says the run before this one finished while it computes.
        if written is not None:
            channel.send(written)
            written = None
        if _fault("FAKE_ENGINE_HANG_ON", run.label):
            time.sleep(3600)
        started = time.perf_counter()
        if os.environ.get("FAKE_ENGINE_FAIL_ON_IMAGE") == job.images[run.target].name:
            channel.send(RunFailed(run.key, run.label, "fake failure on this image"))
            continue
        if run.config.is_gpu:
            channel.send(
                RunFailed(
                    run.key, run.label,
                    f"{run.config.device} requested but the fake engine sees no such device",
                )
            )  # fmt: skip
            continue
        if run.target not in decoded:
            decoded[run.target] = read_image(job.images[run.target].path)
        image = decoded[run.target]
        if not answered:  # as a real run child says what its model takes, once
            model_input = _model_input()
            channels = image.shape[2] if image.ndim == 3 else 1
            channel.send(_model_answer(model_input[2] if model_input else channels))
            answered = True
        if refused := _refused_input(job, run):
            channel.send(RunFailed(run.key, run.label, str(refused), "", True, fix=refused.fix))
            continue
        _slow_first_call(channel, run, compiled)
        batch = (run.computed, run.repeat, run.batch)
        if batch != last_batch:
            channel.send(BatchProgress(run.key, 3, 4, "inference"))  # as the child says it
            last_batch = batch
            time.sleep(float(os.environ.get("FAKE_ENGINE_BATCH_S", "0") or 0))
        probabilities = fake_map(image, job.model_hash, run)
        stored = cache.write_run(_record(job, run, probabilities, time.perf_counter() - started))
        if _fault("FAKE_ENGINE_CRASH_AFTER_WRITE", run.label):
            os.abort()
        # As the real child writes a map while the next run computes: said finished once the
        # next run has started (its file is in place already), with what it stored.
        seconds = round(time.perf_counter() - started, 3)
        written = RunFinished(run.key, run.label, seconds, "cpu:0", stored.to_dict())
    if written is not None:
        channel.send(written)
    return 0


def _probe_may_answer(runtime: str) -> bool:
    """The probe faults (see the module's docstring): whether the probe answers."""
    if os.environ.get("FAKE_ENGINE_PROBE_HANG"):
        time.sleep(3600)
    if meeting := os.environ.get("FAKE_ENGINE_PROBE_MEET"):
        place = Path(meeting)
        (place / runtime).touch()
        deadline = time.monotonic() + 60
        while len(list(place.iterdir())) < 2:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    return True


def main(argv: list[str]) -> int:
    channel = _Channel()
    command = argv[0] if argv else ""
    if command == "run":
        return _run(channel)
    if command == "probe":
        runtime = argv[1] if len(argv) > 1 else "tensorflow"
        if not _probe_may_answer(runtime):
            return 3
        channel.send(ProbeAnswer([dict(_CPU)], {**_facts(runtime), "gpu_absent": ["fake"]}))
        return 0
    if command == "inspect":
        request = json.loads(sys.stdin.read())
        path = request.get("model_path", "")
        if not Path(path).exists():
            channel.send(ChildFatal(path, "no such model file"))
            return 0
        if refused := _safe_mode_refusal(path, bool(request.get("trust_model", False))):
            channel.send(refused)
            return 0
        channel.send(_model_answer(int(os.environ.get("FAKE_ENGINE_INPUT_CHANNELS", "1"))))
        return 0
    if command in ("cli", "gui", "kernel"):  # a front end, its engine children the fake
        from segdiff_gui.runner import child

        child.engine_command = engine_command
        if command == "gui":
            from segdiff_gui.ui.app import main as window_main

            return window_main(argv[1:])
        if command == "kernel":  # a Jupyter kernel, as ipykernel's own launcher starts it
            from ipykernel.kernelapp import launch_new_instance

            launch_new_instance(argv=argv[1:])
            return 0
        from segdiff_gui.cli.main import main as segdiff_main

        return segdiff_main(argv[1:])
    print(f"fake engine: unknown command {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
