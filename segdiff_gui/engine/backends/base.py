"""What the engine asks of a runtime: one small interface, one module per runtime.

The run loop (``engine/worker.py``) and model loading (``engine/models.py``) are shared; a
backend says which devices it has, applies the process-level knobs, compiles (or not) the
forward pass, runs a batch where it was asked to and says where every output and weight
really is, and reads back the settings in effect for provenance.
"""

from __future__ import annotations

import abc
import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.engine.tf32_emulation import emulating

if TYPE_CHECKING:
    from segdiff_gui.engine.models import LoadedModel

__all__ = ["Backend", "Outputs", "RunError", "short_device"]


class RunError(RuntimeError):
    """A run that cannot be done here (e.g. its device does not exist); the others go on."""


@dataclass(frozen=True)
class Outputs:
    """One batch's outputs, as numpy, and where the runtime says they were computed."""

    arrays: list[np.ndarray]
    devices: tuple[str, ...]  # short names: "cpu:0", "gpu:1"
    compute_dtypes: tuple[str, ...]


@dataclass(frozen=True)
class JobInputs:
    """What a child's job gives its backend beyond its runs: where the cache is, the model's
    hash, the preprocessing, the calibration images (hashes, as the planner keyed the runs)
    and how to prepare one. A converted runtime converts with them; others need none."""

    cache_root: str
    model_hash: str
    preprocessing: dict[str, Any]
    calibration: list[str] = field(default_factory=list)
    prepare: Callable[[str], np.ndarray] | None = None  # image hash → prepared H×W×C input


class Backend(abc.ABC):
    """One runtime (TensorFlow, JAX, PyTorch) as the run loop sees it."""

    name: str  # its engine module's runtime, as its compilation cache's folder is named
    # Whether its run child says what the model takes and what devices there are, as an
    # inspection child (which runs TensorFlow) and a device probe would: TensorFlow's only.
    answers_for_inspection = False
    # Whether a layer probe reads the runtime's own intermediate tensors (a converted model)
    # rather than the Keras layers' outputs.
    probes_own_tensors = False
    # Why a layer probe cannot walk this runtime's model, in words after the model's name
    # ("" where it can).
    probe_refusal = ""

    def quantized_output(self, config: RunConfig) -> bool:
        """Whether ``config``'s outputs are computed in int8 (a full-int8 conversion): a
        softmax's channels then sum to 1 only within int8's steps."""
        return False

    def attach(self, inputs: JobInputs) -> None:
        """Take what the job gives beyond its runs (see :class:`JobInputs`); nothing by
        default."""
        return None

    @abc.abstractmethod
    def configure(self, settings: RunConfig, gpus: list[str], compiled_dir: Path) -> None:
        """Apply the process-level knobs after import, before the first op; ``gpus`` are the
        devices this child's runs use (the only GPUs it may touch); ``compiled_dir`` is the
        cache folder's place for a runtime's persistent compilation cache."""

    @abc.abstractmethod
    def devices(self) -> list[dict[str, Any]]:
        """Every device this runtime sees: name (``cpu``, ``gpu:N``), type, description …"""

    @abc.abstractmethod
    def facts(self) -> dict[str, Any]:
        """Versions, build and settings in effect, for provenance and ``segdiff devices``."""

    @abc.abstractmethod
    def forward(self, model: Any, config: RunConfig) -> Callable[[np.ndarray], Outputs]:
        """A callable that runs one batch of ``model`` (a LoadedModel) under ``config``."""

    def make_ready(self, model: Any, config: RunConfig, image_shape: tuple[int, ...]) -> None:
        """Do what a batch of inputs of ``image_shape`` (H×W×C) needs once, before its forward
        pass is timed: a converted runtime converts the model for that size, or reads it from
        the cache. Nothing by default (a runtime compiles within its first call)."""
        return None

    @abc.abstractmethod
    def weight_devices(self, model: Any, config: RunConfig) -> set[str]:
        """Where the weights ``config``'s run computes with live (short names): those of the
        model rebuilt for its precision, not only the loaded float32 one."""

    def load_model(self, path: str, trust: bool) -> LoadedModel:
        """The model file as this runtime's users load it, in the current device scope: a
        LoadedModel of Keras 3 (engine/models.py: safe mode on unless ``trust``)."""
        from segdiff_gui.engine.models import load_model

        return load_model(path, trust)

    def device_scope(self, device: str) -> contextlib.AbstractContextManager[Any]:
        """Where weights are created while a model loads (Keras's own device scope)."""
        import keras

        return keras.device(device)

    # The layer probe (engine/layer_probe.py) -----------------------------------------------
    def layer_call(
        self, config: RunConfig
    ) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
        """How the probe calls one layer under ``config``: as the whole model's forward pass
        would compute it. The default calls it as it is (op by op)."""
        return lambda layer, args, kwargs: layer(*args, **kwargs)

    def probe_scope(self, config: RunConfig) -> contextlib.AbstractContextManager[Any]:
        """Where (and how) the probe's layers run: the forward pass's own placement."""
        return self.device_scope(config.device)

    def probe_input(self, batch: np.ndarray, config: RunConfig) -> Any:
        """The batch as the runtime's tensor on ``config``'s device (inside probe_scope)."""
        import keras

        return keras.ops.convert_to_tensor(batch)

    def to_numpy(self, tensor: Any) -> np.ndarray:
        """A runtime tensor as numpy, in its own dtype (bfloat16 as ml_dtypes' type)."""
        import keras

        return np.asarray(keras.ops.convert_to_numpy(tensor))

    def settings_in_effect(self, config: RunConfig) -> dict[str, Any]:
        """The knobs as the runtime reports them now (read back, never assumed)."""
        return {}

    # Emulated TF32 (engine/tf32_emulation.py) -----------------------------------------------
    def tf32_operand(self, value: Any) -> Any:
        """``value`` rounded to TF32 in this runtime's own ops where it is a float32 tensor,
        else as it is. Only runtimes that take ``emulate`` (core/runtimes.py) have it."""
        raise NotImplementedError(f"{self.name} does not emulate TF32")

    def emulation(self, config: RunConfig) -> contextlib.AbstractContextManager[Counter[str]]:
        """Where ``config``'s forward pass or probed layers run: under its emulation, if any;
        the tally counts the ops rounded."""
        return emulating(config.emulate, self.tf32_operand)

    def predict_compiles(self, model: Any) -> bool | None:
        """Whether the user's ``model.predict`` would compile ``model`` with XLA here, as Keras
        itself resolves it (``Model.jit_compile``, "auto" unless the saved model says
        otherwise); a SavedModel's call does not compile by itself."""
        keras_model = getattr(model, "keras_model", None)
        return bool(keras_model.jit_compile) if keras_model is not None else False

    def explain(self, error: BaseException, config: RunConfig) -> str | None:
        """A runtime's failure in one line with its remedy, or None for the plain message."""
        text = str(error)
        if _out_of_memory(error, text):
            where = config.device
            return (
                f"out of memory on {where} at batch {config.batch}: the batch and the model's "
                f"activations do not fit; choose a smaller batch (batch=N) or another device"
            )
        return None


def _out_of_memory(error: BaseException, text: str) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    return (
        bool(names & {"ResourceExhaustedError", "OutOfMemoryError"})
        or "RESOURCE_EXHAUSTED" in text
        or "CUDA out of memory" in text
        or "Out of memory while trying to allocate" in text
    )


def short_device(kind: str, index: int | str = 0) -> str:
    """``("GPU", 1)`` → ``gpu:1``, ``("cuda", None)`` → ``gpu:0``, ``("cpu", 1)`` → ``cpu:1``
    (JAX's second host device: weights there are not on the CPU device a run asked for)."""
    kind = kind.lower().replace("cuda", "gpu")
    return f"{kind}:{index or 0}"
