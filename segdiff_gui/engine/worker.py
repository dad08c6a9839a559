"""The child's run loop: load the model once, then compute each planned run and write it into
the cache. Imported only after the process-level environment is set (see ``__main__``)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import tensorflow as tf

from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.hashing import hash_path
from segdiff_gui.core.job import EngineJob, PlannedRun
from segdiff_gui.core.preprocess import prepare_input
from segdiff_gui.core.protocol import BatchProgress, ChildFatal, RunFailed, RunFinished, RunStarted
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.engine.facts import device_facts, process_facts
from segdiff_gui.engine.models import Forward, LoadedModel, load_model
from segdiff_gui.engine.outputs import choose_output, to_probabilities
from segdiff_gui.engine.protocol import Channel
from segdiff_gui.io.images import read_image
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.records import RunRecord

__all__ = ["run_job"]

_STEPS = ("building batch", "preparing model", "inference", "writing result")


class RunError(RuntimeError):
    """A run that cannot be done here (e.g. its device does not exist); the others go on."""


def _tf_device(device: str) -> str:
    kind, _, index = device.partition(":")
    return f"/{kind.upper()}:{index or 0}"


def _short_device(tf_name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:0`` → ``gpu:0``."""
    kind, _, index = tf_name.rsplit("device:", 1)[-1].partition(":")
    return f"{kind.lower()}:{index}"


def _shape_text(array: np.ndarray) -> str:
    return "×".join(map(str, array.shape))


def _check_unchanged(path: str, expected: str) -> None:
    if hash_path(path) != expected:
        raise InputError(path, "changed after segdiff planned the runs; run again")


def _test_hooks(label: str, after_write: bool = False) -> None:
    """Test-only faults, driven by environment variables the test suite sets."""
    crash_variable = "SEGDIFF_TEST_CRASH_AFTER_WRITE" if after_write else "SEGDIFF_TEST_CRASH_ON"
    if (crash := os.environ.get(crash_variable)) and crash in label:
        os.abort()
    if after_write:
        return
    if (hang := os.environ.get("SEGDIFF_TEST_HANG_ON")) and hang in label:
        time.sleep(3600)


def _check_batch_fits(batch: int, one: np.ndarray) -> None:
    """A batch is one tensor, plus the model's activations: refuse one that cannot fit."""
    needed = batch * one.nbytes
    available = psutil.virtual_memory().available
    if needed > available // 2:
        raise InputError(
            "batch",
            f"a batch of {batch:,} inputs of {_shape_text(one)} float32 needs "
            f"{needed / 2**30:,.1f} GiB, over half of the {available / 2**30:,.1f} GiB this "
            "machine has free; choose a smaller batch",
        )


class JobRunner:
    def __init__(self, job: EngineJob, channel: Channel) -> None:
        self.job = job
        self.channel = channel
        self.cache = ResultCache(job.cache_root)
        # The parent keyed the runs by these bytes: refuse files changed since it planned.
        _check_unchanged(job.model_path, job.model_hash)
        self.model: LoadedModel = load_model(job.model_path, job.trust_model)
        self.output_index = choose_output(self.model.path, self.model.output_names, job.output)
        self.facts = process_facts()
        self.devices = {d["name"]: d for d in device_facts()}
        self._functions: dict[tuple[str, bool, bool], Any] = {}
        # Prepared inputs, least recently used first. A sweep over a whole test set must not
        # hold every image: one batch's worth (plus the next target) stays, the rest is redone.
        self._inputs: OrderedDict[int, np.ndarray] = OrderedDict()
        self._input_capacity = max((run.config.batch for run in job.runs), default=1) + 1

    def _input(self, index: int) -> np.ndarray:
        if index in self._inputs:
            self._inputs.move_to_end(index)
        else:
            self._inputs[index] = self._prepare(index)
            if len(self._inputs) > self._input_capacity:
                self._inputs.popitem(last=False)
        return self._inputs[index]

    def _prepare(self, index: int) -> np.ndarray:
        image = self.job.images[index]
        _check_unchanged(image.path, image.hash)
        height, width, channels = self.model.input_shape
        return prepare_input(
            read_image(image.path), self.job.preprocessing, height, width, channels, image.path
        )

    def batch_for(self, run: PlannedRun) -> np.ndarray:
        target = self._input(run.target)
        inputs = [self._input(index) for index in run.batch]
        for index, prepared in zip(run.batch, inputs, strict=True):
            if prepared.shape != target.shape:
                # Only a model with free height/width gets here: batches need equal sizes.
                raise InputError(
                    self.job.images[index].path,
                    f"is {_shape_text(prepared)} but the target is "
                    f"{_shape_text(target)}; a batch needs equal sizes (bilinear resizing, for "
                    "a model with a fixed input size; or a batch context of copies)",
                    fix="resize=bilinear",
                )
        _check_batch_fits(run.config.batch, target)
        return np.stack(inputs)

    def compiled(self, precision: str, xla: bool, tf32: bool) -> Forward:
        """One ``tf.function`` per precision, XLA and TF32 setting. XLA is always set
        explicitly because Keras would otherwise decide by itself when a GPU is visible; TF32
        is part of the key because XLA reads it when it compiles, not when it runs."""
        if (precision, xla, tf32) not in self._functions:
            forward = self.model.forward(precision)
            self._functions[precision, xla, tf32] = tf.function(forward, jit_compile=xla)
        return self._functions[precision, xla, tf32]  # type: ignore[no-any-return]

    def step(self, run: PlannedRun, number: int) -> None:
        self.channel.send(BatchProgress(run.key, number, len(_STEPS), _STEPS[number - 1]))

    def execute(self, run: PlannedRun) -> RunRecord:
        config = run.config
        device_name = config.device if config.is_gpu else "cpu"
        if device_name not in self.devices:
            seen = ", ".join(sorted(self.devices)) or "none"
            raise RunError(
                f"{config.device} requested but TensorFlow sees no such device "
                f"(it sees: {seen}); not falling back"
            )
        self.step(run, 1)
        batch = self.batch_for(run)
        self.step(run, 2)
        tf.config.experimental.enable_tensor_float_32_execution(config.tf32)
        function = self.compiled(config.precision, config.xla, config.tf32)
        self.step(run, 3)
        started = time.perf_counter()
        with tf.device(_tf_device(config.device)):
            outputs = function(tf.constant(batch))
        chosen = outputs[self.output_index]
        raw = chosen.numpy()
        wall = time.perf_counter() - started
        actual = _short_device(chosen.device)
        if actual != (config.device if config.is_gpu else "cpu:0"):
            raise RunError(f"{config.device} requested but the output was computed on {actual}")
        self.step(run, 4)
        name = self.model.output_names[self.output_index]
        position = config.position
        probabilities, kind = to_probabilities(
            self.model.path, name, raw[position], self.job.output
        )
        images = self.job.images
        provenance = {
            **self.facts,
            "device": actual,
            "device_requested": config.device,
            "device_description": self.devices[device_name]["description"],
            "tf32_enabled": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
            "xla": config.xla,
            "compute_dtype": chosen.dtype.name,
            "input_batch_shape": list(batch.shape),
            "model_path": str(Path(self.job.model_path).resolve()),
            "model_format": self.model.format,
            "target_path": str(Path(images[run.target].path).resolve()),
            "trust_model": self.job.trust_model,
            "wall_time_s": wall,
            "timestamp": local_timestamp(),
        }
        return RunRecord(
            key=run.key,
            label=run.label,
            config=config.to_dict(),
            repeat=run.repeat,
            model_name=Path(self.job.model_path).name,
            model_hash=self.job.model_hash,
            target_name=images[run.target].name,
            target_hash=images[run.target].hash,
            batch_hashes=[images[i].hash for i in run.batch],
            batch_names=[images[i].name for i in run.batch],
            preprocessing=self.job.preprocessing.to_dict(),
            output=self.job.output.to_dict(),
            output_name=name,
            kind=kind,
            raw_output_shape=[int(d) for d in raw.shape],
            map_shape=probabilities.shape,
            provenance=provenance,
            probabilities=probabilities,
        )

    def run_all(self) -> int:
        for run in self.job.runs:
            self.channel.send(RunStarted(run.key, run.label))
            _test_hooks(run.label)
            try:
                started = time.perf_counter()
                record = self.execute(run)
                self.cache.write_run(record)
                _test_hooks(run.label, after_write=True)
            except InputError as error:
                # This configuration cannot use this input (e.g. float16 overflows to NaN);
                # the others may well.
                detail = traceback.format_exc()[-4000:]  # the child's log, for --debug
                self.channel.send(
                    RunFailed(run.key, run.label, str(error), detail, True, fix=error.fix)
                )
                continue
            except RunError as error:
                self.channel.send(RunFailed(run.key, run.label, str(error)))
                continue
            except Exception as error:  # noqa: BLE001 - one run's failure must not end the job
                self.channel.send(
                    RunFailed(
                        run.key,
                        run.label,
                        f"{type(error).__name__}: {first_line(error)}",
                        traceback.format_exc()[-4000:],
                    )
                )
                continue
            self.channel.send(
                RunFinished(
                    run.key,
                    run.label,
                    round(time.perf_counter() - started, 3),
                    record.provenance["device"],
                )
            )
        return 0


def _test_death_at_start() -> None:
    """Test-only: the first child of a test dies before any run, as the OOM killer does it
    while a model loads; the flag file tells the next child it is not the first."""
    if (flag := os.environ.get("SEGDIFF_TEST_DIE_AT_START")) and not os.path.exists(flag):
        with contextlib.suppress(OSError):  # a flag that cannot be made: every child dies
            Path(flag).touch()
        os.kill(os.getpid(), signal.SIGKILL)


def run_job(job: EngineJob, channel: Channel) -> int:
    _test_death_at_start()
    settings = job.process_config()
    # Both must happen before the first op initialises the runtime.
    if settings.threads:
        tf.config.threading.set_intra_op_parallelism_threads(settings.threads)
    if settings.determinism:
        tf.config.experimental.enable_op_determinism()
    # TensorFlow takes nearly all memory of every visible GPU when it starts them: a second
    # child on the same GPU (the window and a CLI run, two process-level groups) would then
    # fail to start. Each child takes only what its runs need (issue 14, defect 1).
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    try:
        return JobRunner(job, channel).run_all()
    except InputError as error:
        detail = traceback.format_exc()[-4000:]
        channel.send(ChildFatal(error.path, error.problem, detail, fix=error.fix))
        return 3
