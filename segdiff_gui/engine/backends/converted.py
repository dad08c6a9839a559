"""What the converted runtimes (LiteRT, ONNX Runtime) share: the Keras model is loaded under
TensorFlow on the CPU only to be converted; the artefact comes from the cache or is converted
once and stored (engine/conversion.py); the runtime's session runs it. Each runtime's module
says how to open a session and run a batch, and where it runs.

A converted model's outputs are those of the Keras model in order (Keras's export keeps it);
their number and shapes are checked against the Keras model's before the first run.

A model of free input size is converted for LiteRT once per size of the inputs it runs
(``Conversion.fixes_input_size``): a request of images of several sizes runs each batch (one
size) on the artefact of its size, each converted once and cached under its own key, as a
user of such a model expects every image to run. Full int8 calibrates each size's artefact on
the calibration images of that size.

One backend serves every runtime of its engine module that a child runs (LiteRT's four
conversions share a child: ``runtime`` is in their ``Runtime.per_session``): each run's
configuration names its runtime, whose conversion it is converted, keyed, stored and run by,
on a session of its own.

The user's own artefact (a ``.tflite`` under LiteRT, an ``.onnx`` under ONNX
Runtime) is no conversion: its bytes (``engine/artefact_model.LoadedArtefact``) open the
runtime's session as they are, its outputs are checked against what the artefact declares,
and nothing is converted, stored or imported for it besides the runtime."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.runtimes import RUNTIMES, Conversion, Runtime
from segdiff_gui.core.text import shape_text
from segdiff_gui.engine.artefact_model import LoadedArtefact, artefact_of
from segdiff_gui.engine.backends.base import Backend, JobInputs, Outputs, RunError
from segdiff_gui.engine.conversion import conversion_ingredients, convert, fixed_input_shape
from segdiff_gui.engine.facts import cpu_model
from segdiff_gui.engine.tensor_matching import RuntimeTensor
from segdiff_gui.storage.converted import ConvertedModel, ConvertedStore, conversion_key
from segdiff_gui.storage.hdf5_access import UnreadableEntry

__all__ = ["ConvertedBackend", "Session"]

# A batch in, the model's outputs out (numpy, in the Keras model's order).
Session = Callable[[np.ndarray], list[np.ndarray]]
# The height, width and channels a conversion fixed (None: the model's own input size).
InputSize = tuple[int, int, int] | None


@dataclass
class _Artefact:
    """One conversion this child uses: the model, whether the cache had it, its sessions."""

    runtime: Runtime  # whose conversion it is
    converted: ConvertedModel
    reused: bool  # the artefact came from the cache
    # by forward key: the device, and the knobs its runtime sets per session (the thread
    # count, …), so that runs differing in them never share a session
    sessions: dict[tuple[tuple[str, object], ...], Session] = field(default_factory=dict)


def _conversion(runtime: Runtime) -> Conversion:
    conversion = runtime.conversion
    assert conversion is not None, f"{runtime.name} is not a converted runtime"
    return conversion


class ConvertedBackend(Backend):
    """The converted runtimes of one engine module; subclasses open their sessions."""

    probes_own_tensors = True  # LiteRT's and ONNX Runtime's, matched to the Keras layers

    def __init__(self) -> None:
        self.source: JobInputs | None = None
        # by runtime and input size: each conversion of each size once
        self._artefacts: dict[tuple[str, InputSize], _Artefact] = {}
        self.in_use: _Artefact | None = None  # the last batch's: its run's provenance
        self.session_used: Session | None = None  # the last batch's session, likewise
        # The user's own artefact, where the job's model is one: its sessions by forward key.
        self.own: LoadedArtefact | None = None
        self._own_sessions: dict[tuple[tuple[str, object], ...], Session] = {}

    def quantized_output(self, config: RunConfig) -> bool:
        if self.own is not None:
            return self.own.facts.quantized
        return _conversion(RUNTIMES[config.runtime]).quantization == "int8"

    def attach(self, inputs: JobInputs) -> None:
        self.source = inputs

    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        return None  # its settings are each session's options (open_session)

    def device_scope(self, device: str) -> contextlib.AbstractContextManager[Any]:
        import keras

        return keras.device("cpu")  # the Keras model is only converted, on the CPU

    def predict_compiles(self, model: Any) -> bool | None:
        return None  # the converted model runs in the runtime's own kernels: no XLA

    def cpu_device(self) -> dict[str, Any]:
        return {"name": "cpu", "type": "CPU", "description": cpu_model(), "compute_capability": []}

    # the artefact ---------------------------------------------------------------------------
    def _calibration(self, model: Any, runtime: Runtime, size: InputSize) -> list[str]:
        """The images a full-int8 conversion for ``size`` calibrates on: the calibration set,
        or, for a size the conversion fixes, those of its images prepared to that size."""
        source = self.source
        assert source is not None and source.prepare is not None
        if size is None:
            return list(source.calibration)
        fitting = [h for h in source.calibration if source.prepare(h).shape == size]
        if not fitting:
            raise InputError(
                model.path,
                f"cannot be calibrated for {runtime.title} at "
                f"{shape_text(size)}: none of the {len(source.calibration)} "
                "calibration images has that size once prepared (a model of free input size "
                "is converted, and calibrated, for each size it runs; run images of this size "
                "in a request of their own)",
            )
        return fitting

    def _batches(self, hashes: list[str]) -> Iterator[list[np.ndarray]]:
        assert self.source is not None and self.source.prepare is not None
        for image_hash in hashes:
            yield [self.source.prepare(image_hash)[np.newaxis]]

    def artefact(
        self, model: Any, config: RunConfig, image_shape: tuple[int, ...]
    ) -> ConvertedModel:
        """The model converted as ``config``'s runtime converts it, for inputs of
        ``image_shape`` (H×W×C): from the cache, or converted now and stored."""
        runtime = RUNTIMES[config.runtime]
        size = fixed_input_shape(model, _conversion(runtime), image_shape)
        if (runtime.name, size) not in self._artefacts:
            self._artefacts[runtime.name, size] = self._made(model, runtime, size)
        self.in_use = self._artefacts[runtime.name, size]
        return self.in_use.converted

    def _made(self, model: Any, runtime: Runtime, size: InputSize) -> _Artefact:
        conversion = _conversion(runtime)
        source = self.source
        assert source is not None, "a converted runtime's backend needs its job (attach)"
        ingredients = conversion_ingredients(
            runtime, source.model_hash, source.calibration, source.preprocessing, size
        )
        store = ConvertedStore(source.cache_root)
        key = conversion_key(ingredients)
        refused = store.refused(key)  # a folder others write to: neither read nor kept
        stored: ConvertedModel | None = None
        if not refused:
            with contextlib.suppress(UnreadableEntry):  # a damaged artefact is made again
                stored = store.read(key)
        if stored is not None and self.refuses_artefact(stored.data):
            stored = None  # one this runtime cannot open, or a planted one: made again
        if stored is not None:
            return _Artefact(runtime, stored, reused=True)
        calibration = self._calibration(model, runtime, size) if conversion.calibrated else []
        made = convert(model, runtime, ingredients, lambda: self._batches(calibration))
        if problem := self.refuses_artefact(made.data):
            raise InputError(model.path, f"converted for {runtime.title} {problem}")
        made = self._with_quantization_count(made, runtime)
        if size is not None and conversion.calibrated:
            # The images of its size only: named, as they may be fewer than the runs' keys hold.
            made = ConvertedModel(
                made.ingredients, made.data, {**made.facts, "calibrated_on": calibration}
            )
        if refused:
            made = ConvertedModel(
                made.ingredients, made.data, {**made.facts, "store_refused": refused}
            )
        else:
            store.write(made)
        return _Artefact(runtime, made, reused=False)

    def refuses_artefact(self, data: bytes) -> str:
        """What keeps this runtime from opening an artefact, as the end of a sentence ("" when
        nothing): bytes it cannot read, or what would make it read other files or load code (a
        custom op library). The bytes are already checked against their digest. One rule for
        every converted runtime: a stored artefact it refuses is converted again and replaced;
        a new one it refuses is the run's one line. Every converted runtime says."""
        raise NotImplementedError

    def quantized_tensors(self, data: bytes) -> int | None:
        """How many of the artefact's tensors the conversion quantized (None: not counted)."""
        return None

    def _with_quantization_count(
        self, converted: ConvertedModel, runtime: Runtime
    ) -> ConvertedModel:
        """A quantizing conversion that quantized nothing says so: LiteRT leaves weights of
        fewer than 1,024 elements in float32, so a small model's "int8" is its float32."""
        count = self.quantized_tensors(converted.data)
        if count is None or _conversion(runtime).quantization == "float32":
            return converted
        facts = {**converted.facts, "quantized_tensors": count}
        if count == 0:
            said = (
                f"{runtime.title} quantized no tensor of this model (LiteRT quantizes "
                "weights of 1,024 elements or more): it computes as the float32 conversion"
            )
            facts["warnings"] = [said, *facts.get("warnings", [])]
        return ConvertedModel(converted.ingredients, converted.data, facts)

    # running ---------------------------------------------------------------------------------
    def open_session(self, data: bytes, config: RunConfig) -> Session:
        raise NotImplementedError

    def intermediates(
        self,
        data: bytes,
        batch: np.ndarray,
        config: RunConfig,
        choose: Callable[[list[str]], set[str]] = set,
    ) -> tuple[list[np.ndarray], list[RuntimeTensor]]:
        """The model's outputs for ``batch`` and its intermediate tensors in execution order
        (for the layer probe: engine/converted_probe.py). A runtime that returns only the
        tensors asked for (ONNX Runtime) asks ``choose`` which, given every tensor's name in
        order; one that keeps them all anyway (LiteRT) gives them all."""
        raise NotImplementedError

    def output_device(self, config: RunConfig) -> str:
        return "cpu:0"

    def compute_dtype(self) -> str:
        """What the last batch's conversion (or the user's artefact) computes in."""
        if self.own is not None:
            return (
                "as the artefact stores it (int8 or float16 tensors inside)"
                if (self.own.facts.quantized)
                else "float32"
            )
        assert self.in_use is not None
        if self.in_use.converted.facts.get("quantized_tensors") == 0:
            return "float32 (nothing quantized)"
        return {
            "float32": "float32",
            "float16": "float32 (float16 weights)",
            "dynamic-int8": "float32 (int8 weights, dynamic-range int8 kernels)",
            "int8": "int8 (float input and output)",
        }[_conversion(self.in_use.runtime).quantization]

    def _session(self, model: Any, config: RunConfig, image_shape: tuple[int, ...]) -> Session:
        """The session of ``config``'s conversion for inputs of ``image_shape`` (or of the
        user's own artefact, as it is), opened for ``config`` (its device and its session
        options)."""
        key = config.forward_key()
        if (own := artefact_of(model)) is not None:
            self.own = own
            if key not in self._own_sessions:
                self._own_sessions[key] = self.open_session(own.data, config)
            self.session_used = self._own_sessions[key]
            return self.session_used
        self.artefact(model, config, image_shape)
        assert self.in_use is not None
        if key not in self.in_use.sessions:
            self.in_use.sessions[key] = self.open_session(self.in_use.converted.data, config)
        self.session_used = self.in_use.sessions[key]
        return self.session_used

    def make_ready(self, model: Any, config: RunConfig, image_shape: tuple[int, ...]) -> None:
        self._session(model, config, image_shape)

    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        where = self.output_device(config)
        own = artefact_of(model)
        expected = (
            own.output_shapes
            if own is not None
            else [tuple(output.shape[1:]) for output in model.keras_model.outputs]
        )
        title = RUNTIMES[config.runtime].title

        def run(batch: np.ndarray) -> Outputs:
            arrays = self._session(model, config, batch.shape[1:])(batch)
            _check_outputs(model.path, arrays, expected, title, own is not None)
            dtype = self.compute_dtype()
            return Outputs(arrays, (where,) * len(arrays), (dtype,) * len(arrays))

        return run

    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        return {self.output_device(config)}

    def conversion_facts(self) -> dict[str, Any]:
        """The conversion, for every run's provenance (the key, the converter, its size,
        time and warnings; the calibration images a full-int8 run's key includes)."""
        if self.own is not None:
            return {"artefact": f"{self.own.facts.format.title}, run as it is (not converted)"}
        if self.in_use is None:
            return {}
        converted = self.in_use.converted
        facts: dict[str, Any] = {
            "conversion_key": converted.key,
            "conversion_reused": self.in_use.reused,
            **{f"conversion_{name}": value for name, value in converted.facts.items()},
        }
        assert self.source is not None
        if _conversion(self.in_use.runtime).calibrated:
            facts["calibration_hashes"] = list(self.source.calibration)
        return facts


def _check_outputs(
    path: Path,
    arrays: list[np.ndarray],
    expected: list[tuple[Any, ...]],
    title: str,
    own: bool = False,
) -> None:
    """The converted outputs are the Keras model's, in order (``own``: the user's artefact's
    as it declares them): their count and shapes agree."""
    whose = "the artefact declares" if own else "the Keras model's is"
    if len(arrays) != len(expected):
        made = "runs" if own else "converted"
        raise InputError(
            path,
            f"{made} for {title} gives {len(arrays)} outputs where "
            f"{'the artefact declares' if own else 'the Keras model has'} {len(expected)}",
        )
    for index, (array, shape) in enumerate(zip(arrays, expected, strict=True)):
        fits = array.ndim == len(shape) + 1 and all(
            want is None or int(want) == got
            for want, got in zip(shape, array.shape[1:], strict=True)
        )
        if not fits:
            changed = "" if own else "; the conversion changed the model"
            raise RunError(
                f"{title}'s output {index} has shape {list(array.shape)} where {whose} "
                f"{['N', *shape]}{changed}"
            )
