"""The child's run loop: load the model once, then compute each planned run and write it into
the cache. Imported only after the process-level environment is set (see ``__main__``)."""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import psutil

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.defaults import DEFAULT_CALIBRATION_IMAGES
from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.hashing import hash_model, hash_path
from segdiff_gui.core.job import EngineJob, PlannedRun
from segdiff_gui.core.preprocess import is_tensor, prepare_input, tensor_input
from segdiff_gui.core.protocol import BatchProgress, ChildFatal, RunFailed, RunFinished, RunStarted
from segdiff_gui.core.runtimes import RUNTIMES, calibration_set
from segdiff_gui.core.text import shape_text
from segdiff_gui.core.timestamps import local_timestamp
from segdiff_gui.engine.artefact_model import LoadedArtefact, is_artefact, load_any
from segdiff_gui.engine.backends import Backend
from segdiff_gui.engine.backends.base import JobInputs, Outputs, RunError
from segdiff_gui.engine.facts import process_facts
from segdiff_gui.engine.input_sizes import SizeFit
from segdiff_gui.engine.inspect_model import answer_for_model_and_devices
from segdiff_gui.engine.outputs import choose_output, to_probabilities
from segdiff_gui.engine.protocol import Channel
from segdiff_gui.engine.tf32_emulation import summary as emulation_summary
from segdiff_gui.engine.user_code import UserPreprocessing
from segdiff_gui.io.images import read_image
from segdiff_gui.storage.cache import ResultCache, compilation_cache_dir
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord

if TYPE_CHECKING:
    from segdiff_gui.engine.models import LoadedModel

__all__ = ["check_placement", "run_job"]

_STEPS = ("building batch", "preparing model", "inference", "writing result")
_INFERENCE = _STEPS.index("inference") + 1
# While a forward pass runs for the first time (kernels compile: XLA, JAX, or a GPU's PTX
# JIT, which can take many minutes on a new GPU), the child says so every job.heartbeat_s, so
# that the runner's no-progress deadline does not kill it mid-compilation — up to
# an hour.
_HEARTBEAT_LIMIT_S = 3600.0


def _check_unchanged(path: str, expected: str, hashed: Callable[[str], str] = hash_path) -> None:
    if hashed(path) != expected:
        raise InputError(path, "changed after segdiff planned the runs; run again")


def _check_batch_fits(batch: int, one: np.ndarray) -> None:
    """A batch is one tensor, plus the model's activations: refuse one that cannot fit."""
    needed = batch * one.nbytes
    available = psutil.virtual_memory().available
    if needed > available // 2:
        raise InputError(
            "batch",
            f"a batch of {batch:,} inputs of {shape_text(one.shape)} float32 needs "
            f"{needed / 2**30:,.1f} GiB, over half of the {available / 2**30:,.1f} GiB this "
            "machine has free; choose a smaller batch",
        )


# A layer probe's job computes each run by probing it (engine/layer_probe.probe_run), into
# the layer store: the run loop is told so by __main__, and imports no probe.
Probe = Callable[["JobRunner", PlannedRun], str]


class JobRunner:
    def __init__(
        self, job: EngineJob, channel: Channel, backend: Backend, probe: Probe | None = None
    ) -> None:
        self.job = job
        self.probe = probe
        self.channel = channel
        self.backend = backend
        self.cache = ResultCache(job.cache_root)
        # The parent keyed the runs by these bytes: refuse files changed since it planned.
        _check_unchanged(job.model_path, job.model_hash, hash_model)
        # An artefact runs as it is, under its runtime alone: no Keras device scope.
        self._artefact = is_artefact(job.model_path)
        self.devices = {d["name"]: d for d in backend.devices()}
        # One copy of the model per device, its weights created there (weights
        # loaded outside any scope live on the first GPU, and a cpu run reads them through a
        # copy). The first run's device loads now: a model that cannot load ends the child.
        self._models: dict[str, LoadedModel | LoadedArtefact] = {}
        first = job.runs[0].config.device if job.runs else "cpu"
        self.model = self.model_on(first if first in self.devices else "cpu")
        self.output_index = choose_output(self.model.path, self.model.output_names, job.output)
        backend.attach(self._job_inputs())
        self.facts = process_facts(backend)
        self._forwards: dict[tuple[object, ...], Callable[[np.ndarray], Outputs]] = {}
        self._user_function: UserPreprocessing | None = None
        # A model of free height and width takes some sizes only (a U-Net's, multiples of
        # 2**depth): asked of a Keras model's trace where a size fails or is to be resized.
        height, width, _ = self.model.input_shape
        self._free_size = height is None and width is None
        keras_model = self.model.keras_model
        self._sizes = SizeFit(keras_model) if self._free_size and keras_model else None
        self._tensors: set[int] = set()  # images that are tensors, used as they are
        self._compiled: set[tuple[object, ...]] = set()
        # What each emulated forward pass rounded (emulate=tf32), by forward key: counted
        # where it traced (a compiled one counts once, an eager one every call).
        self._emulated: dict[tuple[object, ...], Counter[str]] = {}
        self._said_whole: set[RunConfig] = set()  # configurations whose every step was said
        # Prepared inputs, least recently used first. A sweep over a whole test set must not
        # hold every image: one batch's worth (plus the next target) stays, the rest is redone.
        self._inputs: OrderedDict[tuple[int, tuple[int, ...] | None], np.ndarray] = OrderedDict()
        # A sweep's runs come batch by batch, each batch's configurations together, so that
        # an image is decoded once for them all: two of the largest batches stay (one may
        # reach past the block of images the planner took them in).
        largest = max((run.config.batch for run in job.runs), default=1)
        self._input_capacity = 2 * largest + 1
        # A sweep's last batch through the forward pass, for the next targets it holds.
        self._last_batch: tuple[tuple[object, ...], _Batch] | None = None

    def _job_inputs(self) -> JobInputs:
        """What the job gives its backend: for a conversion, its images calibrate a full-int8
        model exactly as the planner keyed the runs (``calibration_set`` of every image of the
        request)."""
        job = self.job
        index_of = {image.hash: index for index, image in enumerate(job.images)}
        calibration = calibration_set(list(index_of), DEFAULT_CALIBRATION_IMAGES)
        return JobInputs(
            job.cache_root,
            job.model_hash,
            job.preprocessing.to_dict(),
            calibration,
            lambda image_hash: self._prepare(index_of[image_hash]),
        )

    def model_on(self, device: str) -> LoadedModel | LoadedArtefact:
        if device not in self._models:
            job = self.job
            with self._scope(device):
                self._models[device] = load_any(
                    job.model_path, job.trust_model, job.model_hash, self.backend.load_model
                )
        return self._models[device]

    def _scope(self, device: str) -> contextlib.AbstractContextManager[object]:
        """Where a model's weights are made (Keras's device scope); an artefact's runtime
        places them itself."""
        return contextlib.nullcontext() if self._artefact else self.backend.device_scope(device)

    def _input(self, index: int, size: tuple[int, ...] | None = None) -> np.ndarray:
        """The model's input from the image at ``index`` (at ``size``, a batch's target's,
        where bilinear resizing fills a free-size model's batch), kept for the next runs."""
        key = (index, size)
        if key in self._inputs:
            self._inputs.move_to_end(key)
        else:
            self._inputs[key] = self._prepare(index, size)
            if len(self._inputs) > self._input_capacity:
                self._inputs.popitem(last=False)
        return self._inputs[key]

    @property
    def _resizes_freely(self) -> bool:
        """Bilinear resizing for a model of free size: each target to the nearest size the
        model takes (its own, where it takes that), the rest of its batch to the target's."""
        preprocessing = self.job.preprocessing
        return self._free_size and preprocessing.resize == "bilinear" and not preprocessing.function

    def _prepare(self, index: int, size: tuple[int, ...] | None = None) -> np.ndarray:
        image = self.job.images[index]
        _check_unchanged(image.path, image.hash)
        height, width, channels = self.model.input_shape
        decoded = read_image(image.path)
        preprocessing = self.job.preprocessing
        if preprocessing.function is not None:
            if self._user_function is None:
                self._user_function = UserPreprocessing(preprocessing, self.job.trust_preprocess)
            return self._user_function(decoded, height, width, channels, image.path)
        if is_tensor(image.path, decoded):
            self._tensors.add(index)
            return tensor_input(decoded, preprocessing, height, width, channels, image.path)
        if size is not None:
            height, width = size
        prepared = prepare_input(decoded, preprocessing, height, width, channels, image.path)
        fit = self._sizes if size is None and self._resizes_freely else None
        refused = fit.refused(*prepared.shape) if fit is not None else None
        if refused is None:
            return prepared
        return prepare_input(decoded, preprocessing, *refused.nearest, channels, image.path)

    def input_kind(self, index: int) -> str:
        """How the image at ``index`` became the model's input, for provenance."""
        if self.job.preprocessing.function is not None:
            return f"your function {self.job.preprocessing.function}"
        if index in self._tensors:
            return "a tensor, as it is (a .npy of floats)"
        return "an image, preprocessed"

    def batch_for(self, run: PlannedRun) -> np.ndarray:
        target = self._input(run.target)
        size = target.shape[:2] if self._resizes_freely else None
        inputs = [target if i == run.target else self._input(i, size) for i in run.batch]
        for index, prepared in zip(run.batch, inputs, strict=True):
            if prepared.shape != target.shape:
                # Only a model with free height/width gets here: batches need equal sizes.
                # A target of a size the model cannot take is the first thing to mend.
                refused = self._size_refused(run, target.shape)
                raise refused or self._unequal_sizes(run, index, prepared, target)
        _check_batch_fits(run.config.batch, target)
        return np.stack(inputs)

    def _unequal_sizes(
        self, run: PlannedRun, index: int, prepared: np.ndarray, target: np.ndarray
    ) -> InputError:
        """A batch image whose size is not its target's: bilinear resizing (to the target's
        size) mends it where segdiff preprocesses both (no tensor, not the user's function)."""
        path = self.job.images[index].path
        said = f"is {shape_text(prepared.shape)} but the target is {shape_text(target.shape)}"
        said += "; a batch needs equal sizes "
        if self._resizable(index) and self._resizable(run.target):
            said += "(bilinear resizing to the target's, or a batch context of copies)"
            return InputError(path, said, "resize=bilinear")
        return InputError(path, said + "(a batch context of copies, or images of one size)")

    def _size_refused(self, run: PlannedRun, shape: tuple[int, ...]) -> InputError | None:
        """Where a forward pass failed: the one line for a target of a size the model
        cannot take (the image, its size, the model's reason and the size that works)."""
        refused = self._sizes.refused(*shape) if self._sizes is not None else None
        if refused is None:
            return None
        return refused.error(self.job.images[run.target].path, self._resizable(run.target))

    def _resizable(self, index: int) -> bool:
        """Whether bilinear resizing reaches the image at ``index``: segdiff preprocesses it
        (not a tensor, used as it is; not the user's own function's input)."""
        return not self.job.preprocessing.function and index not in self._tensors

    def forward(self, config: RunConfig) -> tuple[Callable[[np.ndarray], Outputs], bool]:
        """The runtime's forward pass for ``config`` on its device, and whether this is its
        first use (where kernels compile)."""
        key = config.forward_key()
        if key not in self._forwards:
            model = self.model_on(config.device)
            with self._scope(config.device):  # a rebuild for precision too
                self._forwards[key] = self.backend.forward(model, config)
        # tf.function and jax.jit compile again for every input shape: batch 64 after batch 1
        # is a first use too.
        first_use = (*key, config.batch) not in self._compiled
        self._compiled.add((*key, config.batch))
        return self._forwards[key], first_use

    @contextlib.contextmanager
    def heartbeat(self, run: PlannedRun, active: bool) -> Iterator[None]:
        """Say "compiling kernels" every few seconds while a first forward pass runs."""
        if not active:
            yield
            return
        done = threading.Event()
        started = time.monotonic()
        interval = self.job.heartbeat_s

        def beat() -> None:
            while not done.wait(interval):
                waited = time.monotonic() - started
                if waited > _HEARTBEAT_LIMIT_S:
                    return  # silence from here on: the runner's deadline takes over
                what = f"compiling kernels (first use), {waited:.0f} s"
                self.channel.send(BatchProgress(run.key, _INFERENCE, len(_STEPS), what))

        thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def step(self, run: PlannedRun, number: int) -> None:
        """Say step ``number`` of ``run``. Every forward pass is said (its inference); the steps
        around it (its batch, its model, its writing) only for a configuration's first run,
        where they may take long (a model prepared, a compilation): a sweep's thousands of runs
        are not said five times each."""
        if number == _INFERENCE or run.computed not in self._said_whole:
            self.channel.send(BatchProgress(run.key, number, len(_STEPS), _STEPS[number - 1]))
        if number == len(_STEPS):
            self._said_whole.add(run.computed)

    def check_device(self, config: RunConfig) -> str:
        """The device ``config`` asks for, as this runtime names it; RunError if absent."""
        device_name = config.device if config.is_gpu else "cpu"
        if device_name not in self.devices:
            seen = ", ".join(sorted(self.devices)) or "none"
            title = RUNTIMES[config.runtime].title
            raise RunError(
                f"{config.device} requested but {title} sees no such device (it sees: {seen}); "
                "not falling back"
            )
        return device_name

    def _emulation(self, config: RunConfig) -> dict[str, str]:
        """An emulated run's provenance: what its forward pass rounded (nothing for others)."""
        if config.emulate == "off":
            return {}
        return {"emulation": emulation_summary(self._emulated.get(config.forward_key(), Counter()))}

    def _computed_batch(self, run: PlannedRun, config: RunConfig) -> _Batch:
        """``run``'s batch through the forward pass of ``config``; a sweep's batch once for
        every target it holds (the runs of one batch follow one another in the job)."""
        self.step(run, 1)
        # The same configuration, repeat and images (at the same size): the same batch.
        size = self._input(run.target).shape[:2] if self._resizes_freely else None
        shared = (config, run.repeat, run.batch, size)
        if self._last_batch is not None and self._last_batch[0] == shared:
            return self._last_batch[1]
        batch = self.batch_for(run)
        self.step(run, 2)
        forward, first_use = self.forward(config)
        try:
            self.backend.make_ready(self.model_on(config.device), config, batch.shape[1:])
            self.step(run, _INFERENCE)
            started = time.perf_counter()
            with self.heartbeat(run, first_use), self.backend.emulation(config) as emulated:
                outputs = forward(batch)
            wall = time.perf_counter() - started
        except Exception as error:
            if refused := self._size_refused(run, batch.shape[1:]):
                raise refused from error
            raise
        if emulated:
            self._emulated[config.forward_key()] = emulated
        computed = _Batch(outputs, wall, tuple(batch.shape))
        self._last_batch = (shared, computed)
        return computed

    def execute(self, run: PlannedRun) -> RunRecord:
        config = run.computed
        device_name = self.check_device(config)
        said = self.backend.predict_compiles(self.model_on(config.device))
        if wrong := run.in_effect.mismatch({**self.facts, "predict_jit": said}):
            raise RunError(wrong)
        computed = self._computed_batch(run, config)
        outputs, wall = computed.outputs, computed.wall
        # What the runtime reports once it has computed (OpenVINO's compiled model's
        # precision): a default predicted otherwise is another computation than the key's.
        settings = self.backend.settings_in_effect(config)
        if wrong := run.in_effect.mismatch({**self.facts, "predict_jit": said, **settings}):
            raise RunError(wrong)
        raw = outputs.arrays[self.output_index]
        actual = outputs.devices[self.output_index]
        weights = self.backend.weight_devices(self.model_on(config.device), config)
        check_placement(config, actual, weights)
        position = run.position
        _check_not_nan(raw[position], config)
        self.step(run, 4)
        name = self.model.output_names[self.output_index]
        probabilities, kind = to_probabilities(
            self.model.path,
            name,
            raw[position],
            self.job.output,
            self.backend.quantized_output(config),
            config.map_dtype,
        )
        images = self.job.images
        provenance = {
            **self.facts,
            "runtime": config.runtime,  # the run's own: LiteRT's conversions share a child
            "device": actual,
            "device_requested": config.device,
            "device_description": self.devices[device_name]["description"],
            "device_identity": self.devices[device_name].get("identity", {}),
            **settings,
            "weights_device": ",".join(sorted(weights)),
            "xla": config.xla,
            "compute_dtype": outputs.compute_dtypes[self.output_index],
            "input_batch_shape": list(computed.shape),
            "model_path": str(Path(self.job.model_path).resolve()),
            "model_format": self.model.format,
            "target_path": str(Path(images[run.target].path).resolve()),
            "target_input": self.input_kind(run.target),
            "trust_model": self.job.trust_model,
            "wall_time_s": wall,
            **self._emulation(config),
            "timestamp": local_timestamp(),
        }
        if in_effect := run.in_effect.to_dict():  # keyed: a stored run's key is made from it
            provenance["defaults_in_effect"] = in_effect
        if self.job.source is not None:  # keyed: the run sits beside its Keras source
            provenance["source_model"] = self.job.source.to_dict()
        return RunRecord(
            key=run.key,
            label=run.label,
            config=run.config.to_dict(),  # as asked: keyed so, with what it was in effect
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
            provenance=Provenance.from_dict(provenance),
            probabilities=probabilities,
            batch_position=run.batch_position,
        )

    def run_all(self) -> int:
        """Compute every run in order; each map is written to the cache by a thread of its
        own while the next run computes, and said finished once it is stored (a layer
        probe's job probes each run in turn)."""
        with _Writer(self.cache, self.channel, self.backend) as writer:
            for run in self.job.runs:
                self.channel.send(RunStarted(run.key, run.label))
                started = time.perf_counter()
                try:
                    if self.probe is not None:
                        device = self.probe(self, run)
                        seconds = round(time.perf_counter() - started, 3)
                        self.channel.send(RunFinished(run.key, run.label, seconds, device))
                    else:
                        writer.put(run, self.execute(run), started)
                except Exception as error:  # noqa: BLE001 - one run's failure must not end the job
                    self.channel.send(run_failed(run, error, self.backend))
        return 0


def run_failed(run: PlannedRun, error: Exception, backend: Backend) -> RunFailed:
    """How one run's failure is said: an input error with its fix (this configuration cannot
    use this input, e.g. float16 overflows to NaN; the others may well), a run error as it
    is, anything else as the runtime explains it."""
    if isinstance(error, InputError):
        detail = traceback.format_exc()[-4000:]  # the child's log, for --debug
        return RunFailed(run.key, run.label, str(error), detail, True, fix=error.fix)
    if isinstance(error, RunError):
        return RunFailed(run.key, run.label, str(error))
    said = backend.explain(error, run.config)
    return RunFailed(
        run.key,
        run.label,
        said or f"{type(error).__name__}: {first_line(error)}",
        traceback.format_exc()[-4000:],
    )


class _Writer:
    """Writes computed runs into the cache on a thread of its own, in order, each said
    finished (or failed) once it is stored: the forward passes do not wait for the
    deflating, the attributes and the sync. The maps waiting are bounded in bytes, not in
    runs (the run loop waits for room): a batch of 64 maps is queued whole while the next
    batch computes, and memory holds at most :attr:`_BUDGET` of them, whatever the set's size
    (one map more than that always fits, however large)."""

    _BUDGET = 128 * 2**20

    def __init__(self, cache: ResultCache, channel: Channel, backend: Backend) -> None:
        self.cache, self.channel, self.backend = cache, channel, backend
        self._waiting: deque[tuple[PlannedRun, RunRecord, float] | None] = deque()
        self._bytes = 0
        self._room = threading.Condition()
        self._thread = threading.Thread(target=self._write_all, name="writer", daemon=True)

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        with self._room:
            self._waiting.append(None)
            self._room.notify_all()
        self._thread.join()

    def put(self, run: PlannedRun, record: RunRecord, started: float) -> None:
        size = _map_bytes(record)
        with self._room:
            self._room.wait_for(lambda: not self._waiting or self._bytes + size <= self._BUDGET)
            self._waiting.append((run, record, started))
            self._bytes += size
            self._room.notify_all()

    def _next(self) -> tuple[PlannedRun, RunRecord, float] | None:
        with self._room:
            self._room.wait_for(lambda: bool(self._waiting))
            return self._waiting[0]

    def _done(self, record: RunRecord) -> None:
        with self._room:
            self._waiting.popleft()
            self._bytes -= _map_bytes(record)
            self._room.notify_all()

    def _write_all(self) -> None:
        while (item := self._next()) is not None:
            run, record, started = item
            try:
                written = self.cache.write_run(record)
            except Exception as error:  # noqa: BLE001 - one run's failure must not end the job
                self.channel.send(run_failed(run, error, self.backend))
                continue
            finally:
                self._done(record)
            seconds = round(time.perf_counter() - started, 3)
            device = record.provenance.device or ""
            said = written.to_dict()
            self.channel.send(RunFinished(run.key, run.label, seconds, device, said))


def _map_bytes(record: RunRecord) -> int:
    return 0 if record.probabilities is None else int(record.probabilities.nbytes)


@dataclass(frozen=True)
class _Batch:
    """One batch through a forward pass: the outputs, the seconds it took, its shape."""

    outputs: Outputs
    wall: float
    shape: tuple[int, ...]


def check_placement(config: RunConfig, output: str, weights: set[str]) -> None:
    """The output and every weight on the device asked for: a runtime that computed or kept
    anything elsewhere has not run this configuration (never a silent fall-back)."""
    expected = config.device if config.is_gpu else "cpu:0"
    if output != expected:
        raise RunError(f"{config.device} requested but the output was computed on {output}")
    if weights - {expected}:
        raise RunError(
            f"{config.device} requested but the model's weights live on "
            f"{', '.join(sorted(weights))}; not computing across devices"
        )


def _check_not_nan(raw: np.ndarray, config: RunConfig) -> None:
    """NaN in the target's output is the runtime's failure under this configuration (e.g. a
    low precision overflowing: ∞ − ∞), never a map to cache. (Infinite logits are not: a
    sigmoid makes probabilities of them; the output check judges them.)"""
    nan = np.isnan(raw.astype(np.float32))
    if nan.any():
        share = 100.0 * float(nan.mean())
        raise RunError(
            f"{config.runtime} produced NaN in {share:.3g} % of the target's output under "
            f"{config.label()} ({config.precision}); not a map, not cached"
        )


def _gpus_of(job: EngineJob) -> list[str]:
    return sorted({run.config.device for run in job.runs if run.config.is_gpu})


def run_job(job: EngineJob, channel: Channel, backend: Backend, probe: Probe | None = None) -> int:
    """Compute every run of ``job`` on ``backend`` (its runtime's, imported by the caller
    with the unused packages skipped) into the cache (or, with ``probe``, probe each into the
    layer store), saying each step on ``channel``; the child's exit code."""
    settings = job.process_config()
    try:
        compiled = compilation_cache_dir(backend.name, job.model_hash)  # one per model
        backend.configure(settings, _gpus_of(job), compiled)
        runner = JobRunner(job, channel, backend, probe)
        if backend.answers_for_inspection and not isinstance(runner.model, LoadedArtefact):
            answer_for_model_and_devices(
                runner.model, list(runner.devices.values()), runner.facts, settings, channel
            )
        return runner.run_all()
    except InputError as error:
        detail = traceback.format_exc()[-4000:]
        channel.send(ChildFatal(error.path, error.problem, detail, fix=error.fix))
        return 3
