"""Planning a matrix: hash the inputs, build each run's batch and cache key, see what is cached,
and group the rest by the process-level settings that force separate children."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import cycle, islice
from pathlib import Path
from typing import IO, Any

import numpy as np

from segdiff_gui.core.artefacts import (
    ARTEFACT_FORMATS,
    KerasSource,
    artefact_format,
    for_artefact,
    source_misfit,
)
from segdiff_gui.core.config import (
    OutputSelection,
    Preprocessing,
    RunConfig,
    saved_model_refuses_precision,
)
from segdiff_gui.core.defaults import DEFAULT_CALIBRATION_IMAGES
from segdiff_gui.core.environment import keyed_environment
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import hash_model, hash_path, run_key
from segdiff_gui.core.job import EngineJob, ImageRef, PlannedRun
from segdiff_gui.core.knobs import KNOBS, KnobRegistry
from segdiff_gui.core.limits import MAX_MODEL_BYTES, MAX_MODEL_CONFIG_BYTES, MAX_REPEATS
from segdiff_gui.core.parallel import thread_map
from segdiff_gui.core.preprocess import is_tensor, prepare_input, tensor_input
from segdiff_gui.core.protocol import ChildFatal, ModelAnswer, skipped_line
from segdiff_gui.core.runtime_defaults import DefaultsInEffect, Machine, defaults_in_effect
from segdiff_gui.core.runtimes import RUNTIMES, calibration_set, calibration_tag
from segdiff_gui.core.shards import shard_slice, shard_unit
from segdiff_gui.core.tf32 import saved_model_refuses_emulation
from segdiff_gui.core.trust import untrusted_saved_model
from segdiff_gui.io.artefacts import ArtefactFacts, read_artefact
from segdiff_gui.io.image_memory import check_images_fit
from segdiff_gui.io.images import read_image
from segdiff_gui.io.untrusted import open_plain
from segdiff_gui.runner.devices import inspect_model, machine_defaults, remembered_inspection
from segdiff_gui.storage.cache import ResultCache, UnreadableEntry

__all__ = [
    "KERAS_MODEL_SUFFIXES",
    "MODEL_SUFFIXES",
    "SAVED_MODEL_FILE",
    "MatrixPlan",
    "Skipped",
    "artefact_facts",
    "batch_slots",
    "beside_source",
    "check_inputs",
    "check_model_path",
    "check_source",
    "fits_source",
    "image_refs",
    "is_model_path",
    "jobs_for",
    "keras_archive_version",
    "model_refusal",
    "model_input",
    "plan_matrix",
    "index_of_target",
]


def batch_slots(config: RunConfig, target: int, image_count: int) -> tuple[int, ...]:
    """Image indices filling a batch: the target at ``config.position``, the other slots taken
    in order from the other images of the set (cycling), or copies of the target."""
    others = [i for i in range(target + 1, image_count)] + list(range(target))
    if config.context == "copies" or not others:
        fillers = [target] * (config.batch - 1)
    else:
        fillers = list(islice(cycle(others), config.batch - 1))
    fillers.insert(config.position, target)
    return tuple(fillers)


def sweep_slots(target: int, image_count: int, batch: int) -> tuple[tuple[int, ...], int]:
    """A sweep's batch of the image at ``target``: the set's consecutive images as
    ``model.predict(x, batch_size=batch)`` cuts them (the last batch the remainder), and
    where the target sits in it."""
    start = target - target % batch
    return tuple(range(start, min(start + batch, image_count))), target - start


def _sweep_order(
    targets: Sequence[int], configs: Sequence[RunConfig], repeats: int, unit: int
) -> list[tuple[RunConfig, int, int]]:
    """A sweep's runs (configuration, repeat, target) in the order a child computes them:
    block by block of ``unit`` images, so that an image is decoded once for every
    configuration, and within a block each configuration's batches one after another, the
    targets of a batch together (its forward pass made once for them all)."""
    order = []
    for number, config in enumerate(configs):
        for target in targets:
            start = target - target % config.batch
            for repeat in range(repeats):
                order.append(((start // unit, number, repeat, start, target), config, repeat))
    order.sort(key=lambda item: item[0])
    return [(config, repeat, place[-1]) for place, config, repeat in order]


def _sweep_refusal(config: RunConfig) -> InputError | None:
    """Why a configuration does not belong in a sweep, or None: its batches are the set's
    consecutive images, so a batch context or position of one target means nothing there."""
    if config.context == "set" and config.position == 0:
        return None
    return InputError(
        "in a sweep",
        "each batch is the set's consecutive images, as predict(x, batch_size) cuts them; "
        "a batch context of copies and a position apply to one target",
    )


@dataclass(frozen=True)
class Skipped:
    """A configuration of the request that this model (or this Python) cannot run, left out
    of the plan so that the others run: a SavedModel under a precision policy, the TF32
    emulation or another runtime; a runtime that is not installed. Every front end says
    each in one line (:meth:`line`); a strict request refuses it instead (:func:`plan_matrix`)."""

    config: RunConfig
    reason: InputError

    @property
    def label(self) -> str:
        return self.config.label()

    def line(self) -> str:
        """``skipped cpu b1 fp64: model.savedmodel: precision override needs …``."""
        return skipped_line(self.label, str(self.reason))


@dataclass(frozen=True)
class MatrixPlan:
    """Everything a runner needs: the jobs still to compute and the runs already cached."""

    model_path: Path
    images: tuple[ImageRef, ...]
    targets: tuple[int, ...]
    runs: tuple[PlannedRun, ...]
    cached: tuple[PlannedRun, ...]
    jobs: tuple[EngineJob, ...]
    model_hash: str
    # Cached entries found damaged, computed again (each names its file and what was wrong).
    damaged: tuple[UnreadableEntry, ...] = ()
    # Cached runs that came from a bundle, not from this machine (said so in reports).
    merged: frozenset[str] = frozenset()
    # The job every child of this plan gets, without its runs (see jobs_for).
    template: EngineJob | None = None
    # Runs to compute that the cache could not store (a read-only cache): no child computes
    # them; ``unwritable`` says why, and the cached runs are served all the same.
    unstorable: tuple[PlannedRun, ...] = ()
    unwritable: InputError | None = None
    # Configurations left out: the model or this Python cannot run them (see Skipped).
    skipped: tuple[Skipped, ...] = ()
    # A sweep's shards are cut at blocks of this many images (core/shards.shard_unit).
    unit: int = 1
    # A sweep's target images to keep beside their runs, checked: kept while they compute.
    images_to_keep: tuple[int, ...] = ()
    # An artefact's Keras source's own plan, where the artefact's runs sit beside it (issue
    # 51): its runs, cached runs and jobs are this plan's too (beside_source).
    source: MatrixPlan | None = None

    def keep_images(self, cache: ResultCache, halted: Callable[[], bool]) -> None:
        """Keep :attr:`images_to_keep` in ``cache`` (until ``halted``): each decoded again,
        as planning checked it. One that cannot be kept (a full disk) is not, and its runs
        show without their picture, as where a kept image is found damaged."""
        for index in self.images_to_keep:
            if halted():
                return
            ref = self.images[index]
            try:
                cache.write_image(ref.hash, ref.name, read_image(Path(ref.path)))
            except (InputError, OSError):
                return

    def check_storable(self) -> None:
        """Raise why the runs to compute could not be stored, where some could not: for a
        workflow that is nothing without them (a layer comparison, a repair's trials)."""
        if self.unwritable is not None:  # set only where runs are to compute (unstorable)
            raise self.unwritable

    @property
    def study_model_hash(self) -> str:
        """The model whose study the runs are in: the model's, or, for an artefact's runs
        beside its Keras source, the source's (as each record's ``study_model_hash``)."""
        return self.source.model_hash if self.source is not None else self.model_hash

    @property
    def target(self) -> int:
        """The first (for a single-image matrix, the only) target."""
        return self.targets[0]

    @property
    def total(self) -> int:
        return len(self.runs)


def _check_keras_archive(path: Path, handle: IO[bytes]) -> None:
    """A ``.keras`` file (``path``, open as ``handle``) is a zip whose members Keras reads
    whole: their declared sizes are bounded before a child opens it (a 2 MB file whose
    config.json inflates to 2 GiB)."""
    import zipfile  # here: a cache hit of a .h5 or SavedModel does without it (4 ms)

    try:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        raise InputError(path, "is not a .keras model (a zip archive was expected)") from None
    for member in members:
        if member.filename == "config.json" and member.file_size > MAX_MODEL_CONFIG_BYTES:
            raise InputError(
                path,
                f"holds a config.json of {member.file_size / 2**20:,.0f} MB unpacked, over "
                f"segdiff's bound of {MAX_MODEL_CONFIG_BYTES >> 20} MB for a model's config",
            )
    unpacked = sum(member.file_size for member in members)
    if unpacked > MAX_MODEL_BYTES:
        raise InputError(
            path,
            f"unpacks to {unpacked / 2**30:,.1f} GiB, over segdiff's bound of "
            f"{MAX_MODEL_BYTES >> 30} GiB for a model",
        )


def image_refs(paths: Sequence[Path]) -> list[ImageRef]:
    """Hash every image (the cache keys are made from its bytes)."""
    refs = []
    names = [p.name for p in paths]
    for path in paths:
        # Distinct images with the same file name (from two folders) keep their parent's name.
        name = path.name if names.count(path.name) == 1 else f"{path.parent.name}/{path.name}"
        refs.append(ImageRef(path=str(path), name=name, hash=hash_path(path)))
    return refs


def _held_together(
    refs: Sequence[ImageRef], to_compute: Sequence[PlannedRun], unstored: Sequence[int]
) -> list[list[Path]]:
    """The images decoded together: each batch still to compute (a child holds its images'
    inputs at once, each image once), and each target image to be stored (alone)."""
    groups: dict[frozenset[int], tuple[int, ...]] = {}
    for run in to_compute:
        indices = tuple(dict.fromkeys((run.target, *run.batch)))
        groups.setdefault(frozenset(indices), indices)
    for index in unstored:
        groups.setdefault(frozenset((index,)), (index,))
    return [[Path(refs[index].path) for index in group] for group in groups.values()]


# What the model takes (height, width, channels), each None where free or not known.
InputShape = tuple[int | None, int | None, int | None]
_UNKNOWN_INPUT: InputShape = (None, None, None)


def _known_input(model: Path, model_hash: str, trust: bool, state_dir: Path) -> InputShape:
    """What the model takes, where a child has said it of this file before (remembered in
    the cache's folder); nothing known otherwise: no child is asked for it here."""
    answer = remembered_inspection(state_dir, model, model_hash, trust)
    if answer is None or len(answer.input_shape) < 3:
        return _UNKNOWN_INPUT
    height, width, channels = answer.input_shape[-3:]
    return height, width, channels


def _decoded(
    path: str, preprocessing: Preprocessing, model_input: Callable[[], InputShape]
) -> np.ndarray:
    """The image at ``path`` decoded; an input the child would refuse refused here, by the
    child's own first step (core/preprocess), before any child starts: a tensor (a ``.npy``
    of floats) for its dtype or the preprocessing given for it, and, where what the model
    takes is known (``model_input``, asked once an image is decoded), a tensor's shape or
    an image's channels and size (``model expects 3 channel(s), image has 1``). Your own
    function's input is your function's to check."""
    image = read_image(Path(path))
    if preprocessing.function is not None:
        return image
    if is_tensor(path, image):
        tensor_input(image, preprocessing, *model_input(), path)
    elif (known := model_input()) != _UNKNOWN_INPUT:
        prepare_input(image, preprocessing, *known, path)
    return image


def check_inputs(
    images: Sequence[Path], preprocessing: Preprocessing, model_input: InputShape
) -> None:
    """Every image decoded and checked as :func:`plan_matrix` checks each one it will
    compute, against what the model takes (``model_input``: height, width and channels,
    each None where free): for a command that writes runs to compute elsewhere
    (``slurm-script``), whose every task would otherwise fail on the same image."""
    check_images_fit([[path] for path in images])  # each decoded alone, header first
    for path in dict.fromkeys(images):
        _decoded(str(path), preprocessing, lambda: model_input)


def model_input(model: Path, trust: bool, state_dir: Path) -> InputShape:
    """What ``model`` takes, asked of a child (or remembered in ``state_dir`` from one, and
    remembered there for the next planner: as a run's child's answer is); why it cannot be
    loaded as an :class:`InputError` naming it."""
    if (facts := artefact_facts(model)) is not None:
        return facts.input_shape
    answer = inspect_model(model, trust, state_dir=state_dir, model_hash=hash_model(model))
    if isinstance(answer, ChildFatal):
        raise InputError(answer.path, answer.problem, answer.fix)
    if len(answer.input_shape) < 3:
        return _UNKNOWN_INPUT
    height, width, channels = answer.input_shape[-3:]
    return height, width, channels


def _check_images(
    refs: Sequence[ImageRef],
    to_compute: Sequence[PlannedRun],
    decoded: set[str],
    preprocessing: Preprocessing,
    model_input: Callable[[], InputShape],
) -> None:
    """Decode every image a run still to compute will read (unless ``decoded`` already), so
    that a bad file fails here, before any child starts, naming the file. Images only cached
    runs were made from are not read again: a cache hit decodes nothing (a thousand-image
    sweep run again would otherwise decode a thousand images for nothing)."""
    needed = sorted({index for run in to_compute for index in (run.target, *run.batch)})
    for index in needed:
        ref = refs[index]
        if ref.hash not in decoded:
            _decoded(ref.path, preprocessing, model_input)
            decoded.add(ref.hash)  # the same file given twice is decoded once


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

_LEGACY_SUFFIXES = (".h5", ".hdf5")  # a legacy (HDF5) Keras model
KERAS_MODEL_SUFFIXES = (".keras", *_LEGACY_SUFFIXES)
SAVED_MODEL_FILE = "saved_model.pb"  # the graph inside a SavedModel folder
_KERAS2_METADATA = "keras_metadata.pb"  # Keras 2's layers, beside the graph of its SavedModel
_MAX_METADATA_BYTES = 1 << 16  # a .keras archive's metadata.json: a version and a date


# Every model file a front end opens: Keras's, and the user's own artefacts (core/artefacts).
MODEL_SUFFIXES = (*KERAS_MODEL_SUFFIXES, *(artefact.suffix for artefact in ARTEFACT_FORMATS))
_EXPECTED = "expected .keras, .h5, a SavedModel folder, .tflite, .onnx or an OpenVINO IR .xml"


def is_model_path(path: str | Path) -> bool:
    """Whether ``path`` names a model rather than images: a Keras model file, a SavedModel
    folder, the ``saved_model.pb`` inside one (a folder without it holds images), or an
    artefact (``.tflite``, ``.onnx``, an IR's ``.xml``)."""
    path = Path(path)
    if path.is_dir():
        return (path / SAVED_MODEL_FILE).is_file()
    return path.name == SAVED_MODEL_FILE or path.suffix.lower() in MODEL_SUFFIXES


def check_model_path(path: str | Path) -> Path:
    """Refuse what cannot be a model before TensorFlow spends seconds starting up. A
    SavedModel's ``saved_model.pb`` stands for its folder (what a file dialog lets one pick),
    and the folder is returned. An artefact is read from its own bytes here
    (``io/artefacts.read_artefact``): what would make a runtime read outside it or run code
    is one line naming it, before any child opens it."""
    path = Path(path)
    if path.name == SAVED_MODEL_FILE and path.is_file():
        path = path.absolute().parent
    if path.is_dir():
        if not (path / SAVED_MODEL_FILE).is_file():
            raise InputError(path, "folder is not a SavedModel (no saved_model.pb)")
        return path
    if not path.exists():
        raise InputError(path, "no such model file or folder")
    suffix = path.suffix.lower()
    if artefact_format(path) is not None:
        read_artefact(path)
        return path
    if suffix != ".keras" and suffix not in _LEGACY_SUFFIXES:
        raise InputError(path, f"unknown model format; {_EXPECTED}")
    with open_plain(path, "model") as handle:  # a FIFO or a device is one line, never a wait
        if suffix == ".keras":
            _check_keras_archive(path, handle)
        elif handle.read(8) != _HDF5_SIGNATURE:
            raise InputError(path, "is not a legacy .h5 model (not an HDF5 file)")
    return path


def artefact_facts(model: Path) -> ArtefactFacts | None:
    """What an artefact takes and gives (read from its bytes, checked), or None for a Keras
    model or a SavedModel."""
    return read_artefact(model) if artefact_format(model) is not None else None


def index_of_target(refs: Sequence[ImageRef], target: str | None) -> int:
    """The index of the image ``target`` names (its name, path or stem; default the first)."""
    if target is None:
        return 0
    for index, ref in enumerate(refs):
        if target in (ref.name, ref.path, Path(ref.path).stem):
            return index
    names = ", ".join(ref.name for ref in refs[:10])
    more = f" and {len(refs) - 10} more" if len(refs) > 10 else ""
    raise InputError(target, f"is not one of the images given ({names}{more})")


def model_refusal(
    model: Path, config: RunConfig, facts: ArtefactFacts | None = None
) -> InputError | None:
    """Why ``model`` cannot run ``config`` whatever the cache holds, or None: a SavedModel's
    fixed graph takes no precision policy, no TF32 emulation and no runtime but TensorFlow's
    (Keras 3's or Keras 2's, where Keras 2 saved it); Keras 2 reads no Keras 3 ``.keras``;
    an artefact runs under its format's runtimes only, at its fixed batch where it has one
    (core/artefacts.for_artefact). Said here rather than by a child."""
    if facts is not None:
        try:
            for_artefact(config, model, facts.fixed_batch)
        except InputError as error:
            return error
        return None
    runtime = RUNTIMES[config.runtime]
    if runtime.keras == 2 and (refusal := _keras2_refusal(model, runtime.title)) is not None:
        return refusal
    if not model.is_dir():
        return None
    if config.precision != "float32":
        return saved_model_refuses_precision(model)
    if config.emulate != "off":
        return saved_model_refuses_emulation(model, config.emulate)
    if not runtime.tensorflow_kernels:
        return InputError(
            model,
            f"is a TensorFlow SavedModel: its graph runs only under TensorFlow, not "
            f"{config.runtime} (runtime=tensorflow)",
        )
    return None


def _keras2_refusal(model: Path, title: str) -> InputError | None:
    """Why Keras 2 (``title``: tf_keras) cannot load ``model``, or None: a ``.keras`` that Keras
    3 wrote (its ``metadata.json`` says which Keras), a SavedModel without Keras 2's own
    metadata (a Keras 3 export: TensorFlow runs its serving signature)."""
    if model.is_dir():
        if (model / _KERAS2_METADATA).is_file():
            return None
        return InputError(
            model,
            f"is a SavedModel without Keras 2's {_KERAS2_METADATA}: {title} cannot load it as "
            "a Keras model; TensorFlow runs its serving signature (runtime=tensorflow)",
        )
    if model.suffix.lower() != ".keras":
        return None
    version = keras_archive_version(model)
    if version.split(".", 1)[0] in ("", "2"):
        return None  # tf_keras's own .keras, or one that does not say: tf_keras decides
    return InputError(
        model,
        f"is a Keras {version} .keras file, which {title} (Keras 2) cannot read; Keras 3 runs "
        "it (runtime=tensorflow)",
    )


def keras_archive_version(path: Path) -> str:
    """The Keras version a ``.keras`` archive's ``metadata.json`` says wrote it ("" where it
    says none, or where its metadata is not a small JSON object)."""
    import zipfile  # here: only a .keras file under Keras 2 is read for it

    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("metadata.json")
            if info.file_size > _MAX_METADATA_BYTES:
                return ""
            metadata = json.loads(archive.read(info))
    except (KeyError, OSError, ValueError, zipfile.BadZipFile):
        return ""
    version = metadata.get("keras_version") if isinstance(metadata, dict) else None
    if isinstance(version, str) and version.isprintable() and len(version) <= 32:
        return version
    return ""


def _runtimes_missing(configs: Iterable[RunConfig]) -> dict[str, InputError]:
    """Why this Python cannot compute some of ``configs``, by runtime: those not installed
    (said before any child starts)."""
    missing = {}
    for name in dict.fromkeys(config.runtime for config in configs):
        runtime = RUNTIMES[name]
        if not runtime.installed():
            install = f"pip install 'segdiff[{runtime.extra}]'" if runtime.extra else "reinstall"
            missing[name] = InputError(
                f"runtime={name}", f"{runtime.title} is not installed in this Python ({install})"
            )
    return missing


def _skipping(
    refusals: Sequence[Skipped], strict: bool, anything_left: bool
) -> tuple[Skipped, ...]:
    """The configurations to leave out, said by every front end; the first refusal raised
    instead where the request is strict or nothing would be left to run."""
    if refusals and (strict or not anything_left):
        raise refusals[0].reason
    return tuple(refusals)


def _child_of(run: PlannedRun, knobs: KnobRegistry) -> tuple[object, ...]:
    """Which child computes a run: one per set of process-level knobs, and for repeats in
    fresh processes one per repeat index too, so that no two repeats of a configuration share
    a process (a sweep's images still share theirs)."""
    settings = knobs.process_settings(run.config)
    if getattr(run.config, "repeat_scope", "process") == "fresh":
        return (*settings, run.repeat)
    return settings


def check_source(artefact: Path, source: Path) -> KerasSource:
    """``source`` as the Keras model ``artefact`` was converted from (checked as any model
    is, then hashed): an artefact's own runs sit beside its source's; a source that is not a
    Keras model, or an artefact given a source that is none, is one line."""
    if artefact_format(artefact) is None:
        raise InputError(
            source,
            f"is given as a Keras source, but {artefact.name} is not your own artefact (a "
            ".tflite, .onnx or OpenVINO IR): a source goes beside an artefact",
        )
    source = check_model_path(source)
    if artefact_format(source) is not None or source.is_dir():
        raise InputError(
            source, "is not a Keras model (.keras or legacy .h5): an artefact's source is one"
        )
    return KerasSource(source.name, hash_model(source), str(source))


def fits_source(artefact: ArtefactFacts, answer: ModelAnswer, source: Path) -> None:
    """Refuse, in one line naming both shapes, an artefact whose input or outputs are not
    those of its source (``answer``: what a child said the source takes and gives)."""
    outputs = [list(output.get("shape", [])) for output in answer.outputs]
    misfit = source_misfit(
        artefact.input_shape,
        [output.shape for output in artefact.outputs],
        answer.input_shape,
        outputs,
    )
    if misfit:
        raise InputError(artefact.path, f"does not fit its Keras source {source.name}: {misfit}")


def beside_source(artefact: MatrixPlan, source: MatrixPlan) -> MatrixPlan:
    """The artefact's plan with its source's beside it: one plan of both models' runs on the
    same images (the source's first: its reference), each run by children of its own."""
    unwritable = artefact.unwritable or source.unwritable
    return replace(
        artefact,
        runs=source.runs + artefact.runs,
        cached=source.cached + artefact.cached,
        jobs=source.jobs + artefact.jobs if unwritable is None else (),
        damaged=source.damaged + artefact.damaged,
        merged=source.merged | artefact.merged,
        unstorable=source.unstorable + artefact.unstorable,
        unwritable=unwritable,
        skipped=source.skipped + artefact.skipped,
        source=source,
    )


@dataclass(frozen=True)
class _Inputs:
    """What the planning steps share once the request is checked: the model (an artefact's
    facts read from its bytes) and its hash, the images hashed, how they are prepared and
    what is trusted, and the Keras source an artefact's runs sit beside."""

    model: Path
    facts: ArtefactFacts | None
    model_hash: str
    refs: tuple[ImageRef, ...]
    preprocessing: Preprocessing
    output: OutputSelection
    trust_model: bool
    trust_preprocess: bool
    source: KerasSource | None

    def model_input(self, state_dir: Path) -> Callable[[], InputShape]:
        """What the model takes (see :func:`_decoded`), asked once: an artefact says it from
        its bytes; of a Keras model, what a child said of it before (``state_dir``)."""
        facts = self.facts
        return functools.cache(
            (lambda: facts.input_shape)
            if facts is not None
            else functools.partial(
                _known_input, self.model, self.model_hash, self.trust_model, state_dir
            )
        )

    def template(self, cache_root: Path) -> EngineJob:
        """The job every child of the plan gets, without its runs (see :func:`jobs_for`)."""
        return EngineJob(
            model_path=str(self.model),
            model_hash=self.model_hash,
            trust_model=self.trust_model,
            trust_preprocess=self.trust_preprocess,
            preprocessing=self.preprocessing,
            output=self.output,
            images=self.refs,
            cache_root=str(cache_root),
            source=self.source,
        )


def _checked_model(model_path: str | Path, trust_model: bool) -> Path:
    """The model, checked as any model is (:func:`check_model_path`); a SavedModel refused
    unless trusted, before its files are read to be hashed."""
    model = check_model_path(model_path)
    if model.is_dir() and not trust_model:
        raise untrusted_saved_model(model)
    return model


def _runnable_configs(
    model: Path,
    facts: ArtefactFacts | None,
    configs: Sequence[RunConfig],
    *,
    sweeping: bool,
    strict: bool,
) -> tuple[list[RunConfig], tuple[Skipped, ...]]:
    """The configurations ``model`` can run (an artefact's with its runtime knob at its
    default: the artefact's own), and those it or a sweep cannot, left out; the first
    refusal raised instead where ``strict`` or where nothing would be left (:func:`_skipping`)."""
    refused = [
        Skipped(config, reason)
        for config in dict.fromkeys(configs)
        if (reason := model_refusal(model, config, facts) or (sweeping and _sweep_refusal(config)))
    ]
    left_out = {skip.config for skip in refused}
    runnable = [config for config in configs if config not in left_out]
    if facts is not None:
        runnable = list(dict.fromkeys(for_artefact(c, model, facts.fixed_batch) for c in runnable))
    return runnable, _skipping(refused, strict, anything_left=bool(runnable))


def _check_request(model: Path, image_paths: Sequence[str | Path], repeats: int) -> None:
    """Refuse a request without images, or with repeats out of segdiff's bounds."""
    if not image_paths:
        raise InputError(model, "no images given")
    if not 1 <= repeats <= MAX_REPEATS:
        raise InputError("repeats", f"must be between 1 and {MAX_REPEATS:,}, not {repeats:,}")


def _check_trusted(preprocessing: Preprocessing, trust_preprocess: bool) -> None:
    """Refuse the user's own preprocessing function where it is not trusted."""
    if preprocessing.function is not None and not trust_preprocess:
        raise InputError(
            preprocessing.function_file or preprocessing.function,
            "is your own code: it runs in segdiff's child only when you trust it "
            "(trust the preprocessing function)",
            fix="trust_preprocess=on",
        )


def _targets(
    refs: Sequence[ImageRef],
    configs: Sequence[RunConfig],
    *,
    target: str | None,
    sweep: bool,
    shard: tuple[int, int] | None,
) -> tuple[list[int], int]:
    """The images the runs are of (the ``target``, a sweep's every image, or shard ``K`` of
    ``N`` of them), and the blocks of images a sweep's shards are cut at
    (core/shards.shard_unit; 1 where not sharded)."""
    if shard is not None:
        unit = shard_unit(len(refs), shard[1], max((c.batch for c in configs), default=1))
        targets = list(shard_slice(len(refs), shard, unit))
        if not targets:
            raise InputError(
                "--shard", f"{shard[0]}/{shard[1]} holds no image: the set has only {len(refs)}"
            )
        return targets, unit
    if sweep:
        return list(range(len(refs))), 1
    return [index_of_target(refs, target)], 1


@dataclass(frozen=True)
class _RunKeys:
    """What a run's cache key holds besides its configuration, repeat and batch: the inputs,
    the keyed environment, each configuration's defaults in effect on this machine, and the
    images a full-int8 conversion is calibrated on (the set's: core/runtimes.py)."""

    inputs: _Inputs
    preprocessing: dict[str, Any]
    output: dict[str, Any]
    environment: dict[str, str]
    effects: dict[RunConfig, DefaultsInEffect]
    calibration: list[str]
    tag: str  # the calibration set in a full-int8 run's label (core/runtimes.calibration_tag)

    @classmethod
    def of(cls, inputs: _Inputs, configs: Sequence[RunConfig], machine: Machine) -> _RunKeys:
        calibration = calibration_set([ref.hash for ref in inputs.refs], DEFAULT_CALIBRATION_IMAGES)
        return cls(
            inputs,
            inputs.preprocessing.to_dict(),
            inputs.output.to_dict(),
            keyed_environment(os.environ),
            {config: defaults_in_effect(config, os.environ, machine) for config in configs},
            calibration,
            calibration_tag(calibration),
        )

    def run(
        self,
        config: RunConfig,
        repeat: int,
        target: int,
        slots: tuple[int, ...],
        batch_position: int | None,
    ) -> PlannedRun:
        """The run of ``config`` (its ``repeat``) on the image at ``target`` in the batch of
        the images at ``slots`` (a sweep's ``batch_position``), keyed."""
        refs, source, in_effect = self.inputs.refs, self.inputs.source, self.effects[config]
        calibrated = _calibrated(config)
        key = run_key(
            model_hash=self.inputs.model_hash,
            preprocessing=self.preprocessing,
            output=self.output,
            environment=self.environment,
            target_hash=refs[target].hash,
            batch_hashes=[refs[i].hash for i in slots],
            config=config.to_dict(),
            repeat=repeat,
            calibration=self.calibration if calibrated else None,
            defaults_in_effect=in_effect.to_dict(),
            batch_position=batch_position,
            source=source.sha256 if source else None,
        )
        return PlannedRun(
            key,
            config,
            repeat,
            target=target,
            batch=slots,
            tag=self.tag if calibrated else "",
            in_effect=in_effect,
            batch_position=batch_position,
            beside=self.inputs.model.name if source else "",
        )


def _planned_runs(
    keys: _RunKeys,
    configs: Sequence[RunConfig],
    targets: Sequence[int],
    repeats: int,
    sweeping: bool,
) -> tuple[PlannedRun, ...]:
    """Every run of the request, keyed; the same configuration asked twice runs once."""
    runs: dict[str, PlannedRun] = {}
    each = _sweep_runs if sweeping else _target_runs
    for run in each(keys, configs, targets, repeats):
        runs.setdefault(run.key, run)
    return tuple(runs.values())


def _sweep_runs(
    keys: _RunKeys, configs: Sequence[RunConfig], targets: Sequence[int], repeats: int
) -> Iterator[PlannedRun]:
    """A sweep's runs, batch by batch as predict computes the set, each batch once."""
    largest = max((config.batch for config in configs), default=1)
    for config, repeat, target in _sweep_order(targets, configs, repeats, largest):
        slots, position = sweep_slots(target, len(keys.inputs.refs), config.batch)
        # A full batch led by its target is the one run of that target computes too.
        whole = position == 0 and len(slots) == config.batch
        yield keys.run(config, repeat, target, slots, None if whole else position)


def _target_runs(
    keys: _RunKeys, configs: Sequence[RunConfig], targets: Sequence[int], repeats: int
) -> Iterator[PlannedRun]:
    """The runs of each target, its batch filled as each configuration says (batch_slots)."""
    for target in targets:
        for config in configs:
            slots = batch_slots(config, target, len(keys.inputs.refs))
            for repeat in range(repeats):
                yield keys.run(config, repeat, target, slots, None)


@dataclass(frozen=True)
class _Found:
    """The runs planned, by what the cache holds: those ``cached`` (``merged``: the keys of
    those from a bundle) and those ``to_compute``, among them the ``damaged`` entries."""

    runs: tuple[PlannedRun, ...]
    cached: tuple[PlannedRun, ...]
    to_compute: tuple[PlannedRun, ...]
    damaged: tuple[UnreadableEntry, ...]
    merged: frozenset[str]


def _look_up(cache: ResultCache, runs: tuple[PlannedRun, ...]) -> _Found:
    """Which ``runs`` are cached and which to compute. A damaged entry (a flipped byte, a
    truncated file) is computed again and replaced."""
    cached: list[PlannedRun] = []
    to_compute: list[PlannedRun] = []
    damaged: list[UnreadableEntry] = []
    merged: set[str] = set()
    for run in runs:
        if not cache.has(run.key):
            to_compute.append(run)
            continue
        record, problem = cache.checked(run.key)
        if problem is not None:
            damaged.append(problem)
            to_compute.append(run)
            continue
        cached.append(run)
        if record is not None and record.provenance.merged:
            merged.add(run.key)
    return _Found(runs, tuple(cached), tuple(to_compute), tuple(damaged), frozenset(merged))


def _computable(found: _Found) -> tuple[_Found, list[Skipped]]:
    """``found`` without the runs to compute under a runtime this Python lacks (its cached
    runs are served), and the configurations so left out."""
    lacking = _runtimes_missing(run.config for run in found.to_compute)
    if not lacking:
        return found, []
    left_out = [run for run in found.to_compute if run.config.runtime in lacking]
    absent = [Skipped(c, lacking[c.runtime]) for c in dict.fromkeys(r.config for r in left_out)]
    dropped = {run.key for run in left_out}
    return replace(
        found,
        runs=tuple(run for run in found.runs if run.key not in dropped),
        to_compute=tuple(run for run in found.to_compute if run.key not in dropped),
    ), absent


def _images_to_store(
    cache: ResultCache, refs: Sequence[ImageRef], targets: Sequence[int], found: _Found
) -> list[int]:
    """The target images the cache lacks (to keep beside their runs), once every image to
    decode is known, from its header, to fit in memory with those decoded with it."""
    unstored = [index for index in targets if not cache.has_image(refs[index].hash)]
    check_images_fit(_held_together(refs, found.to_compute, unstored))
    return unstored


def _unwritable(
    cache: ResultCache, unstored: list[int], found: _Found
) -> tuple[list[int], InputError | None]:
    """What cannot be stored, said before anything is computed: where the cache cannot be
    written (read-only), no target image is kept, and why the runs to compute cannot be
    stored (None where there are none: nothing refused). The cached runs are still served,
    and those to compute left, each said to be unstorable (see MatrixRunner)."""
    cannot_write = cache.write_problem() if found.to_compute or unstored else None
    if cannot_write is None:
        return unstored, None
    return [], cannot_write if found.to_compute else None


def _decode_images(
    inputs: _Inputs, cache: ResultCache, unstored: list[int], found: _Found, sweeping: bool
) -> tuple[int, ...]:
    """Decode, and so check, every image the plan reads, before any child starts. Each
    target image the cache lacks (``unstored``) is kept beside its results, so that they
    can be shown without the original: one target's now; a sweep's many while its runs
    compute (MatrixRunner: the indices returned), checked now."""
    decoded: set[str] = set()
    model_input = inputs.model_input(cache.root)
    unstored_once = []  # an image given twice is decoded once
    for index in unstored:
        if (image_hash := inputs.refs[index].hash) not in decoded:
            unstored_once.append(index)
            decoded.add(image_hash)
    if sweeping:
        # Checked side by side (Pillow decodes without the GIL) once the first is, alone: it
        # asks what the model takes. Each image is let go of once checked: a set of any size
        # fits. The first bad one in the set's order is the one said.
        check = functools.partial(_checked_only, inputs.refs, inputs.preprocessing, model_input)
        if unstored_once:
            check(unstored_once[0])
        thread_map(check, unstored_once[1:])
    else:
        for index in unstored_once:
            ref = inputs.refs[index]
            image = _decoded(ref.path, inputs.preprocessing, model_input)
            cache.write_image(ref.hash, ref.name, image)
    _check_images(inputs.refs, found.to_compute, decoded, inputs.preprocessing, model_input)
    return tuple(unstored_once) if sweeping else ()


def _checked_only(
    refs: Sequence[ImageRef],
    preprocessing: Preprocessing,
    model_input: Callable[[], InputShape],
    index: int,
) -> None:
    """Image ``index`` decoded and checked as :func:`_decoded` does, and let go of."""
    _decoded(refs[index].path, preprocessing, model_input)


def plan_matrix(
    model_path: str | Path,
    image_paths: Sequence[str | Path],
    configs: Sequence[RunConfig],
    *,
    cache: ResultCache,
    repeats: int,
    target: str | None = None,
    preprocessing: Preprocessing | None = None,
    output: OutputSelection | None = None,
    trust_model: bool = False,
    trust_preprocess: bool = False,
    sweep: bool = False,
    shard: tuple[int, int] | None = None,
    knobs: KnobRegistry = KNOBS,
    machine: Machine | None = None,
    strict: bool = False,
    source: KerasSource | None = None,
) -> MatrixPlan:
    """Plan ``configs × repeats`` runs of ``model_path`` on the target among ``image_paths``,
    or, for a ``sweep``, on every image (only shard ``K`` of ``N`` with ``shard=(K, N)``).
    Batches are always filled from the whole set, so a shard's runs equal the unsharded ones.
    ``machine``: what the unset knobs' defaults depend on (asked here when not given).

    A configuration the model or this Python cannot run is left out and named in
    ``skipped``, so that the others run; the request is refused instead (its first such
    configuration's reason raised) where ``strict`` or where nothing would be left.
    ``source``: the Keras model the artefact ``model_path`` was converted from, whose study
    its runs join (keyed with it and named apart: :func:`beside_source` adds its plan).

    The steps, in order: check the model, the configurations and the request; hash the
    images and pick the targets; key every run; see which are cached; leave out a missing
    runtime's; see what cannot be stored; decode what will be read; group the rest in jobs."""
    model = _checked_model(model_path, trust_model)
    facts = artefact_facts(model)
    sweeping = sweep or shard is not None
    configs, skipped = _runnable_configs(model, facts, configs, sweeping=sweeping, strict=strict)
    _check_request(model, image_paths, repeats)
    cache.claim()  # before anything is written into the folder
    preprocessing = preprocessing or Preprocessing()
    _check_trusted(preprocessing, trust_preprocess)
    refs = tuple(image_refs([Path(p) for p in image_paths]))
    targets, unit = _targets(refs, configs, target=target, sweep=sweep, shard=shard)
    inputs = _Inputs(
        model,
        facts,
        hash_model(model),
        refs,
        preprocessing,
        output or OutputSelection(),
        trust_model,
        trust_preprocess,
        source,
    )
    machine = machine or machine_defaults(model, configs, cache.root)
    runs = _planned_runs(_RunKeys.of(inputs, configs, machine), configs, targets, repeats, sweeping)
    found, absent = _computable(_look_up(cache, runs))
    skipped += _skipping(absent, strict, anything_left=bool(found.runs))
    unstored, unwritable = _unwritable(cache, _images_to_store(cache, refs, targets, found), found)
    to_keep = _decode_images(inputs, cache, unstored, found, sweeping)
    template = inputs.template(cache.root)
    return MatrixPlan(
        model_path=model,
        images=refs,
        targets=tuple(targets),
        runs=found.runs,
        cached=found.cached,
        jobs=jobs_for(template, found.to_compute, knobs) if unwritable is None else (),
        model_hash=inputs.model_hash,
        damaged=found.damaged,
        merged=found.merged,
        template=template,
        unstorable=found.to_compute if unwritable is not None else (),
        unwritable=unwritable,
        skipped=skipped,
        unit=unit,
        images_to_keep=to_keep,
    )


def _calibrated(config: RunConfig) -> bool:
    conversion = RUNTIMES[config.runtime].conversion
    return conversion is not None and conversion.calibrated


def jobs_for(
    template: EngineJob, runs: Sequence[PlannedRun], knobs: KnobRegistry = KNOBS, **changes: Any
) -> tuple[EngineJob, ...]:
    """``runs`` as jobs of ``template`` (with ``changes``): one per child they need."""
    groups: dict[tuple[object, ...], list[PlannedRun]] = {}
    for run in runs:
        groups.setdefault(_child_of(run, knobs), []).append(run)
    return tuple(replace(template, runs=tuple(group), **changes) for group in groups.values())
