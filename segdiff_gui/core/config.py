"""Run configurations and preprocessing settings: plain, hashable, Qt-free and TF-free.

A :class:`RunConfig` names every knob that can change a probability map. Knobs split in two:
process-level ones (oneDNN, intra-op threads, op determinism) are read by TensorFlow once per
process, so configurations that differ in them need separate child processes; the others can be
switched between runs inside one child.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from fractions import Fraction
from typing import Any, ClassVar, Literal, TypeVar, overload

import numpy as np

from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.knobs import EXACT_PRECISION, KNOBS, KnobRegistry
from segdiff_gui.core.runtimes import RUNTIMES, Runtime

__all__ = [
    "ACTIVATIONS",
    "PRECISIONS",
    "Activation",
    "ConfigError",
    "ModelSettings",
    "OutputSelection",
    "Preprocessing",
    "RunConfig",
    "is_reduced_precision",
    "parse_config_spec",
    "parse_preprocessing",
    "saved_model_refuses_precision",
]

PRECISIONS: tuple[str, ...] = KNOBS["precision"].choices
# What a model's output is before it is a probability map: probabilities already, or logits.
Activation = Literal["none", "sigmoid", "softmax"]
ACTIVATIONS: tuple[Activation, ...] = ("none", "sigmoid", "softmax")


def is_reduced_precision(precision: str) -> bool:
    """Whether ``precision`` (a precision knob's value) computes layers below float32: a
    mixed policy (bfloat16, float16), not float32 or the exact reference's float64."""
    return precision not in ("float32", EXACT_PRECISION)


def saved_model_refuses_precision(model: object) -> InputError:
    """Why a SavedModel takes no precision policy but float32: the runner says it before any
    child starts, the child (where planning was passed by) in the same words."""
    return InputError(
        model,
        "precision override needs a Keras model (.keras or .h5); a SavedModel's graph has "
        "fixed dtypes",
    )


def _default(name: str) -> Any:
    return KNOBS.default(name)


@dataclass(frozen=True)
class RunConfig:
    """One configuration of the matrix: a value for every knob of
    :data:`~segdiff_gui.core.knobs.KNOBS`, whose entries say what each knob does and how it is
    written, checked and labelled (a test holds these fields to that list)."""

    runtime: str = _default("runtime")
    device: str = _default("device")
    batch: int = _default("batch")
    context: Literal["set", "copies"] = _default("context")
    position: int = _default("position")
    determinism: bool = _default("determinism")
    tf32: bool = _default("tf32")
    onednn: bool | None = _default("onednn")  # None: the runtime's default, not forced
    threads: int = _default("threads")
    xla: bool | None = _default("xla")  # None: as model.predict decides (runtime_defaults)
    precision: str = _default("precision")
    keep_float32: tuple[str, ...] = _default("keep_float32")
    # None: the runtime's default (OpenVINO's, by the CPU), read back from the compiled model
    inference_precision: str | None = _default("inference_precision")
    # None: LiteRT's interpreter's default (XNNPACK applied), read back from it
    xnnpack: str | None = _default("xnnpack")
    # None: ONNX Runtime's default level (all), read back from its session
    graph_optimization: str | None = _default("graph_optimization")
    emulate: str = _default("emulate")
    repeat_scope: Literal["process", "fresh"] = _default("repeat_scope")
    # The registry these fields are, and the runtimes that say which knobs each takes (a
    # configuration type with a knob more names its own).
    knobs: ClassVar[KnobRegistry] = KNOBS
    runtimes: ClassVar[Mapping[str, Runtime]] = RUNTIMES

    def __post_init__(self) -> None:
        self.knobs.normalise(self)
        # What relates two knobs: a position inside the batch, and no context without one.
        if not 0 <= self.position < self.batch:
            raise ConfigError(f"position {self.position} is outside a batch of {self.batch}")
        if self.batch == 1:
            # A batch of one has no context: normalise so equal runs get equal cache keys.
            object.__setattr__(self, "context", "set")
        refusal = self.runtimes[self.runtime].refusal(self)
        if self.keep_float32 and not self.reduced_precision and not refusal:
            raise ConfigError(
                "keep_float32 keeps layers in float32 under a reduced precision; this "
                f"configuration computes everything in {self.precision} already"
            )
        if self.is_exact and not self.tf32 and not refusal:
            raise ConfigError(
                "tf32=off means nothing under precision=float64: TF32 rounds float32 matrix "
                "products only, and the exact reference has none (keep tf32=on)"
            )
        if refusal:
            raise ConfigError(refusal)
        if emulation := self._emulation_refusal():
            raise ConfigError(emulation)

    def _emulation_refusal(self) -> str:
        """Why an emulation of a GPU's arithmetic cannot be asked with the other knobs ("" when
        it can): it is a CPU's prediction of a GPU's TF32, in float32, with TF32 on."""
        if self.emulate == "off":
            return ""
        if self.is_gpu:
            return (
                f"emulate={self.emulate} runs on {self.device}: emulation is for CPU runs; on a "
                "GPU use tf32=on, which measures TF32 itself (device=cpu)"
            )
        if self.precision != "float32":
            return (
                f"emulate={self.emulate} rounds float32 inputs of convolutions and matrix "
                f"multiplies, and precision={self.precision} computes them in another type "
                "already (precision=float32)"
            )
        if not self.tf32:
            return (
                f"emulate={self.emulate} predicts a GPU with TF32 on, and tf32=off says it is "
                "off (leave tf32 on)"
            )
        return ""

    @property
    def reduced_precision(self) -> bool:
        """Whether layers compute below float32 (a mixed policy: bfloat16 or float16)."""
        return is_reduced_precision(self.precision)

    @property
    def is_exact(self) -> bool:
        """Whether this is the exact reference: every layer in float64 on the
        float32 weights and input widened exactly, its map stored as float64. It is compared
        beside the reference, never among the float32 runs."""
        return self.precision == EXACT_PRECISION

    @property
    def map_dtype(self) -> np.dtype[np.floating[Any]]:
        """The dtype its probability map is computed, stored and read in: little-endian
        float64 for the exact reference, float32 for every other run."""
        return np.dtype("<f8") if self.is_exact else np.dtype("<f4")

    @property
    def is_gpu(self) -> bool:
        return self.device.startswith("gpu")

    def process_settings(self) -> tuple[object, ...]:
        """The engine module and the knobs its runtime reads once per process; equal values may
        share a child (``KnobRegistry.process_settings``)."""
        return self.knobs.process_settings(self)

    def forward_key(self) -> tuple[tuple[str, object], ...]:
        """What the child's forward pass for this configuration is built for (the device,
        XLA, the precision and the layers kept in float32, and any knob added at run time)."""
        return self.knobs.forward_key(self)

    @property
    def fresh_repeats(self) -> bool:
        """Whether each repeat runs in a new process of its own."""
        return self.repeat_scope == "fresh"

    def to_dict(self) -> dict[str, Any]:
        """The stored and keyed form (knobs added later are left out at their defaults)."""
        return KNOBS.stored(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def label(self) -> str:
        """Short human label, naming only what differs from the defaults: ``cpu b64 xla``."""
        return KNOBS.label(self)

    def to_spec(self) -> str:
        """The ``key=value`` spec that :func:`parse_config_spec` turns back into this config."""
        return KNOBS.spec(self)


_C = TypeVar("_C")
_HEX = "0123456789abcdef"


@overload
def parse_config_spec(spec: str, base: None = None, knobs: KnobRegistry = KNOBS) -> RunConfig: ...


@overload
def parse_config_spec(spec: str, base: _C, knobs: KnobRegistry = KNOBS) -> _C: ...


def parse_config_spec(spec: str, base: Any = None, knobs: KnobRegistry = KNOBS) -> Any:
    """Parse ``device=cpu,batch=64,xla=on`` into a configuration: ``base`` (the default
    :class:`RunConfig`) with the knobs named changed, as ``knobs`` reads them."""
    values = knobs.parse(spec)
    start: Any = RunConfig() if base is None else base
    return replace(start, **values)


@dataclass(frozen=True)
class Preprocessing:
    """How an image file becomes the model's input; part of the cache key. In float32, in
    this order (core/preprocess.py):

    1. the pixels as float32 (``x = image.astype(np.float32)``);
    2. scaled: ``x / float32(divisor)`` or ``x * float32(scale)``, whichever is given; neither:
       by the image's dtype, dividing (``x / 255`` for 8-bit, ``x / 65535`` for 16-bit, float
       images unchanged), as ``img.astype(np.float32) / 255.0`` does. Dividing and multiplying
       by the reciprocal round differently (Keras's ``Rescaling(1/255)`` multiplies);
    3. colour converted, only when asked: ``keep``, ``gray`` or ``rgb``;
    4. resized: ``refuse`` (a size mismatch is an error) or ``bilinear``;
    5. ``x - mean``, then ``x / std``, per channel (one value applies to all).

    ``by_dtype`` is the arithmetic of step 2 when neither number is given: ``divide``, or
    ``multiply`` (by 1/255 or 1/65535), which older stored runs did.

    Or the user's own function replaces all five (``function``: ``prepare.py:prepare``, from
    the image array to the model's input; ``function_sha256``: its file's bytes, keyed;
    ``function_file``: where the child loads it from, not keyed). It runs only in the child,
    and only when trusted (:attr:`ModelSettings.trust_preprocess`).
    """

    scale: float | None = None
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    color: Literal["keep", "gray", "rgb"] = "keep"
    resize: Literal["refuse", "bilinear"] = "refuse"
    divisor: float | None = None
    by_dtype: Literal["divide", "multiply"] = "divide"
    function: str | None = None
    function_sha256: str | None = None
    function_file: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.function is not None:
            self._check_function()
        if self.color not in ("keep", "gray", "rgb"):
            raise ConfigError(f"color must be keep, gray or rgb, not {self.color!r}")
        if self.resize not in ("refuse", "bilinear"):
            raise ConfigError(f"resize must be refuse or bilinear, not {self.resize!r}")
        if self.by_dtype not in ("divide", "multiply"):
            raise ConfigError(f"by_dtype must be divide or multiply, not {self.by_dtype!r}")
        for name in ("scale", "divisor"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive finite number, not {value}")
        if self.scale is not None and self.divisor is not None:
            raise ConfigError("give a scale (x * scale) or a divisor (x / divisor), not both")
        if self.scale is not None or self.divisor is not None:
            object.__setattr__(self, "by_dtype", "divide")  # unused: equal settings, equal keys
        if not all(math.isfinite(v) for v in (*self.mean, *self.std)):
            raise ConfigError("mean and std must be finite numbers (not nan or inf)")
        if any(s == 0 for s in self.std):
            raise ConfigError("std must not contain 0")

    def to_dict(self) -> dict[str, Any]:
        """The stored and keyed form. A divisor, and dividing by the dtype, came after caches
        existed: they are written only when used, so every run stored before keeps its key."""
        data: dict[str, Any] = {
            "scale": self.scale,
            "mean": list(self.mean),
            "std": list(self.std),
            "color": self.color,
            "resize": self.resize,
        }
        if self.function is not None:
            return {"function": self.function, "function_sha256": self.function_sha256}
        if self.divisor is not None:
            data["divisor"] = self.divisor
        elif self.scale is None and self.by_dtype == "divide":
            data["by_dtype"] = "divide"
        return data

    def to_job_dict(self) -> dict[str, Any]:
        """What a child needs: the keyed form and where the function's file is."""
        data = self.to_dict()
        if self.function_file is not None:
            data["function_file"] = self.function_file
        return data

    def _check_function(self) -> None:
        name, sep, function = str(self.function).rpartition(":")
        if not sep or not name.endswith(".py") or not function.isidentifier():
            raise ConfigError(
                f"preprocess must be FILE.py:function, not {str(self.function)[:80]!r}"
            )
        digest = self.function_sha256
        if not (isinstance(digest, str) and len(digest) == 64 and set(digest) <= set(_HEX)):
            raise ConfigError("a preprocessing function needs its file's SHA-256")
        others = Preprocessing(by_dtype=self.by_dtype)
        if (self.scale, self.divisor, self.mean, self.std, self.color, self.resize) != (
            others.scale,
            others.divisor,
            others.mean,
            others.std,
            others.color,
            others.resize,
        ):
            raise ConfigError(
                "a preprocessing function replaces divide, scale, mean, std, colour and resize: "
                "leave them at their defaults"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preprocessing:
        if "function" in data:
            return cls(
                function=data.get("function"),
                function_sha256=data.get("function_sha256"),
                function_file=data.get("function_file"),
            )
        return cls(
            scale=data.get("scale"),
            mean=tuple(data.get("mean", ())),
            std=tuple(data.get("std", ())),
            color=data.get("color", "keep"),
            resize=data.get("resize", "refuse"),
            divisor=data.get("divisor"),
            by_dtype=data.get("by_dtype", "multiply"),  # absent: an older stored run
        )

    def scaling_text(self) -> str:
        """Step 2 in words: ``x / 255``, ``x * 0.00392157``, ``x / dtype max``; the user's
        function by its name (``prepare.py:prepare #3fa2``)."""
        if self.function is not None:
            return f"{self.function} #{str(self.function_sha256)[:4]}"
        if self.divisor is not None:
            return f"x / {self.divisor:g}"
        if self.scale is not None:
            return f"x * {self.scale:.6g}"
        return "x / dtype max" if self.by_dtype == "divide" else "x * (1 / dtype max)"


def _parse_floats(key: str, value: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in value.split(","))
    except ValueError:
        raise ConfigError(f"{key} must be numbers separated by commas, not {value!r}") from None


def _positive(name: str, text: str, example: str) -> float:
    try:
        value = float(Fraction(text))
        if value <= 0:
            raise ValueError
    except (ValueError, ZeroDivisionError):
        raise ConfigError(
            f"{name} must be a positive number or fraction like {example}, not {text!r}"
        ) from None
    return value


def parse_preprocessing(
    scale: str | None = None,
    mean: str | None = None,
    std: str | None = None,
    color: str = "keep",
    resize: str = "refuse",
    divide: str | None = None,
) -> Preprocessing:
    """Build :class:`Preprocessing` from command-line strings (``--divide 255 --mean 0.5``,
    ``--scale 1/255``)."""
    scale_value = None
    if scale is not None and scale.lower() != "auto":
        scale_value = _positive("scale", scale, "1/255")
    divisor = None
    if divide is not None and divide.lower() != "auto":
        divisor = _positive("divide", divide, "255")
    return Preprocessing(
        scale=scale_value,
        mean=_parse_floats("mean", mean) if mean else (),
        std=_parse_floats("std", std) if std else (),
        color=color,  # type: ignore[arg-type]
        resize=resize,  # type: ignore[arg-type]
        divisor=divisor,
    )


@dataclass(frozen=True)
class OutputSelection:
    """Which model output is the probability map and how to make it one.

    ``output`` is a name or an index (as text) for models with several outputs, ``None`` for the
    only one. ``activation`` is ``none`` (outputs must already be probabilities), ``sigmoid`` or
    ``softmax`` (applied by segdiff to raw logits).
    """

    output: str | None = None
    activation: Activation = "none"

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ConfigError(
                f"activation must be none, sigmoid or softmax, not {self.activation!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "activation": self.activation}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutputSelection:
        return cls(output=data.get("output"), activation=data.get("activation", "none"))

    def index_in(self, names: Sequence[str], where: object) -> int:
        """The index of the chosen output among a model's ``names`` (an InputError naming
        ``where`` if none fits: several outputs need one named)."""
        wanted = self.output
        if wanted is None:
            if len(names) == 1:
                return 0
            raise InputError(
                where,
                f"model has {len(names)} outputs ({', '.join(names)}); choose one (output: a "
                "name or an index)",
                fix="output",
            )
        if wanted in names:
            return list(names).index(wanted)
        if wanted.lstrip("-").isdigit() and -len(names) <= int(wanted) < len(names):
            return int(wanted) % len(names)
        raise InputError(
            where, f"model has no output {wanted!r} (outputs: {', '.join(names)})", fix="output"
        )


@dataclass(frozen=True)
class ModelSettings:
    """What a model needs to run at all, the same under every configuration: how an image
    becomes its input, which output is the map, and whether its code may run. Preprocessing
    and output are part of every run's cache key; trust only lets the model load (a Lambda
    layer or a SavedModel graph can run any code: Keras safe mode is off when trusted)."""

    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    output: OutputSelection = field(default_factory=OutputSelection)
    trust_model: bool = False
    # The user's preprocessing function may run in the child (it can run any code).
    trust_preprocess: bool = False
