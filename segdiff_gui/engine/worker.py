"""The child's run loop: load the model once, then compute each planned run and write it into
the cache. Imported only after the process-level environment is set (see ``__main__``)."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import EngineJob, PlannedRun
from segdiff_gui.core.preprocess import prepare_input
from segdiff_gui.core.progress import BatchProgress, ChildFatal, RunFailed, RunFinished, RunStarted
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


def _test_hooks(label: str) -> None:
    """Test-only faults, driven by environment variables the test suite sets."""
    if (crash := os.environ.get("SEGDIFF_TEST_CRASH_ON")) and crash in label:
        os.abort()
    if (hang := os.environ.get("SEGDIFF_TEST_HANG_ON")) and hang in label:
        time.sleep(3600)


class JobRunner:
    def __init__(self, job: EngineJob, channel: Channel) -> None:
        self.job = job
        self.channel = channel
        self.cache = ResultCache(job.cache_root)
        self.model: LoadedModel = load_model(job.model_path, job.trust_model)
        self.output_index = choose_output(self.model.path, self.model.output_names, job.output)
        self.facts = process_facts()
        self.devices = {d["name"]: d for d in device_facts()}
        self._inputs: dict[int, np.ndarray] = {}
        self._functions: dict[tuple[str, bool], Any] = {}

    def prepared(self, index: int) -> np.ndarray:
        if index not in self._inputs:
            image = self.job.images[index]
            height, width, channels = self.model.input_shape
            self._inputs[index] = prepare_input(
                read_image(image.path), self.job.preprocessing, height, width, channels, image.path
            )
        return self._inputs[index]

    def compiled(self, precision: str, xla: bool) -> Forward:
        """One ``tf.function`` per precision and XLA setting; XLA is always set explicitly
        because Keras would otherwise decide by itself when a GPU is visible."""
        if (precision, xla) not in self._functions:
            forward = self.model.forward(precision)
            self._functions[precision, xla] = tf.function(forward, jit_compile=xla)
        return self._functions[precision, xla]  # type: ignore[no-any-return]

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
        batch = np.stack([self.prepared(index) for index in run.batch])
        self.step(run, 2)
        function = self.compiled(config.precision, config.xla)
        tf.config.experimental.enable_tensor_float_32_execution(config.tf32)
        self.step(run, 3)
        started = time.perf_counter()
        with tf.device(_tf_device(config.device)):
            outputs = function(tf.constant(batch))
        chosen = outputs[self.output_index]
        raw = chosen.numpy()
        wall = time.perf_counter() - started
        actual = _short_device(chosen.device)
        if actual.split(":")[0] != config.device.split(":")[0] or (
            config.is_gpu and actual != config.device
        ):
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
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
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
            except InputError:
                raise  # the same for every run: let main report it once
            except RunError as error:
                self.channel.send(RunFailed(run.key, run.label, str(error)))
                continue
            except Exception as error:  # noqa: BLE001 - one run's failure must not end the job
                first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                self.channel.send(
                    RunFailed(
                        run.key,
                        run.label,
                        f"{type(error).__name__}: {first}"[:500],
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


def run_job(job: EngineJob, channel: Channel) -> int:
    determinism, _onednn, threads = job.process_settings()
    # Both must happen before the first op initialises the runtime.
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    if determinism:
        tf.config.experimental.enable_op_determinism()
    try:
        return JobRunner(job, channel).run_all()
    except InputError as error:
        channel.send(ChildFatal(str(error)))
        return 3
