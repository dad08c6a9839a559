"""Run configurations and preprocessing settings: plain, hashable, Qt-free and TF-free.

A :class:`RunConfig` names every knob that can change a probability map. Knobs split in two:
process-level ones (oneDNN, intra-op threads, op determinism) are read by TensorFlow once per
process, so configurations that differ in them need separate child processes; the others can be
switched between runs inside one child.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields, replace
from fractions import Fraction
from typing import Any, Literal

from segdiff_gui.core.limits import MAX_BATCH

__all__ = [
    "PRECISIONS",
    "ConfigError",
    "OutputSelection",
    "Preprocessing",
    "RunConfig",
    "parse_config_spec",
    "parse_preprocessing",
]

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
_PRECISION_SHORT = {"float32": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}
_DEVICE_RE = re.compile(r"^(cpu|gpu)(?::(\d+))?$")
_TRUE = {"on", "true", "1", "yes"}
_FALSE = {"off", "false", "0", "no"}


class ConfigError(ValueError):
    """A configuration or preprocessing specification that cannot be understood."""


@dataclass(frozen=True, order=True)
class RunConfig:
    """One configuration of the matrix.

    Attributes
    ----------
    device : ``"cpu"`` or ``"gpu:N"``; a missing device fails the run, never falls back.
    batch : batch size the target image is inferred in.
    context : ``"set"`` fills the batch with the other images of the set, ``"copies"`` with
        copies of the target.
    position : index of the target inside the batch.
    determinism : ``tf.config.experimental.enable_op_determinism()`` (process-level).
    tf32 : TensorFloat-32 on Ampere+ GPUs (TensorFlow's default is on).
    onednn : ``TF_ENABLE_ONEDNN_OPTS`` (process-level, read at TF import).
    threads : intra-op thread count, 0 for TensorFlow's default (process-level).
    xla : compile the forward pass with XLA (``jit_compile``); always set explicitly.
    precision : Keras dtype policy the model is rebuilt with.
    """

    device: str = "cpu"
    batch: int = 1
    context: Literal["set", "copies"] = "set"
    position: int = 0
    determinism: bool = False
    tf32: bool = True
    onednn: bool = True
    threads: int = 0
    xla: bool = False
    precision: str = "float32"

    def __post_init__(self) -> None:
        match = _DEVICE_RE.match(self.device.lower())
        if not match:
            raise ConfigError(f"device must be 'cpu' or 'gpu:N', not {self.device!r}")
        kind, index = match.groups()
        object.__setattr__(self, "device", f"{kind}:{index}" if kind == "gpu" else "cpu")
        if kind == "gpu" and index is None:
            object.__setattr__(self, "device", "gpu:0")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ConfigError(f"batch must be between 1 and {MAX_BATCH:,}, not {self.batch:,}")
        if self.context not in ("set", "copies"):
            raise ConfigError(f"context must be 'set' or 'copies', not {self.context!r}")
        if not 0 <= self.position < self.batch:
            raise ConfigError(f"position {self.position} is outside a batch of {self.batch}")
        if self.threads < 0:
            raise ConfigError(
                f"threads must be 0 (TensorFlow's default) or more, not {self.threads}"
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}")
        if self.batch == 1:
            # A batch of one has no context: normalise so equal runs get equal cache keys.
            object.__setattr__(self, "context", "set")

    @property
    def is_gpu(self) -> bool:
        return self.device.startswith("gpu")

    def process_settings(self) -> tuple[bool, bool, int]:
        """The knobs TensorFlow reads once per process; equal values may share a child."""
        return (self.determinism, self.onednn, self.threads)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def label(self) -> str:
        """Short human label, naming only what differs from the defaults: ``cpu b64 xla``."""
        parts = [self.device, f"b{self.batch}"]
        if self.batch > 1 and self.context == "copies":
            parts.append("copies")
        if self.position:
            parts.append(f"pos{self.position}")
        if self.determinism:
            parts.append("det")
        if not self.tf32:
            parts.append("tf32-off")
        if not self.onednn:
            parts.append("onednn-off")
        if self.threads:
            parts.append(f"threads{self.threads}")
        if self.xla:
            parts.append("xla")
        if self.precision != "float32":
            parts.append(_PRECISION_SHORT[self.precision])
        return " ".join(parts)

    def to_spec(self) -> str:
        """The ``key=value`` spec that :func:`parse_config_spec` turns back into this config."""
        on = {True: "on", False: "off"}
        return (
            f"device={self.device},batch={self.batch},context={self.context},"
            f"position={self.position},determinism={on[self.determinism]},tf32={on[self.tf32]},"
            f"onednn={on[self.onednn]},threads={self.threads},xla={on[self.xla]},"
            f"precision={self.precision}"
        )


def _parse_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{key} must be on or off, not {value!r}")


def _parse_int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{key} must be a whole number, not {value!r}") from None


_SPEC_ALIASES = {"deterministic": "determinism", "bs": "batch"}


def parse_config_spec(spec: str, base: RunConfig | None = None) -> RunConfig:
    """Parse ``device=cpu,batch=64,xla=on`` into a :class:`RunConfig` (unnamed keys default)."""
    values: dict[str, Any] = {}
    items = [part.strip() for part in spec.split(",") if part.strip()]
    if not items:
        raise ConfigError("an empty --config; give key=value pairs such as batch=64")
    for item in items:
        if "=" not in item:
            raise ConfigError(f"config item {item!r} is not key=value")
        key, value = (s.strip() for s in item.split("=", 1))
        key = _SPEC_ALIASES.get(key.lower(), key.lower())
        if key in values:
            raise ConfigError(f"config {spec!r} gives {key} twice")
        if key in ("batch", "position", "threads"):
            values[key] = _parse_int(key, value)
        elif key in ("determinism", "tf32", "onednn", "xla"):
            values[key] = _parse_bool(key, value)
        elif key == "precision":
            aliases = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
            values[key] = aliases.get(value.lower(), value.lower())
        elif key in ("device", "context"):
            values[key] = value.lower()
        else:
            valid = ", ".join(f.name for f in fields(RunConfig))
            raise ConfigError(f"unknown config key {key!r} (valid keys: {valid})")
    return replace(base or RunConfig(), **values)


@dataclass(frozen=True)
class Preprocessing:
    """How an image file becomes the model's input; part of the cache key.

    ``scale=None`` means: by the image's dtype (1/255 for 8-bit, 1/65535 for 16-bit, 1 for float).
    ``mean``/``std`` are per channel (one value applies to all), applied after scaling.
    ``color`` converts only when asked: ``keep``, ``gray`` or ``rgb``.
    ``resize`` is ``refuse`` (a size mismatch is an error) or ``bilinear``.
    """

    scale: float | None = None
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    color: Literal["keep", "gray", "rgb"] = "keep"
    resize: Literal["refuse", "bilinear"] = "refuse"

    def __post_init__(self) -> None:
        if self.color not in ("keep", "gray", "rgb"):
            raise ConfigError(f"color must be keep, gray or rgb, not {self.color!r}")
        if self.resize not in ("refuse", "bilinear"):
            raise ConfigError(f"resize must be refuse or bilinear, not {self.resize!r}")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise ConfigError(f"scale must be a positive finite number, not {self.scale}")
        if not all(math.isfinite(v) for v in (*self.mean, *self.std)):
            raise ConfigError("mean and std must be finite numbers (not nan or inf)")
        if any(s == 0 for s in self.std):
            raise ConfigError("std must not contain 0")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["mean"], data["std"] = list(self.mean), list(self.std)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preprocessing:
        return cls(
            scale=data.get("scale"),
            mean=tuple(data.get("mean", ())),
            std=tuple(data.get("std", ())),
            color=data.get("color", "keep"),
            resize=data.get("resize", "refuse"),
        )


def _parse_floats(key: str, value: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in value.split(","))
    except ValueError:
        raise ConfigError(f"{key} must be numbers separated by commas, not {value!r}") from None


def parse_preprocessing(
    scale: str | None = None,
    mean: str | None = None,
    std: str | None = None,
    color: str = "keep",
    resize: str = "refuse",
) -> Preprocessing:
    """Build :class:`Preprocessing` from command-line strings (``--scale 1/255 --mean 0.5``)."""
    scale_value = None
    if scale is not None and scale.lower() != "auto":
        try:
            scale_value = float(Fraction(scale))
            if scale_value <= 0:
                raise ValueError
        except (ValueError, ZeroDivisionError):
            raise ConfigError(
                f"scale must be a positive number or fraction like 1/255, not {scale!r}"
            ) from None
    return Preprocessing(
        scale=scale_value,
        mean=_parse_floats("mean", mean) if mean else (),
        std=_parse_floats("std", std) if std else (),
        color=color,  # type: ignore[arg-type]
        resize=resize,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class OutputSelection:
    """Which model output is the probability map and how to make it one.

    ``output`` is a name or an index (as text) for models with several outputs, ``None`` for the
    only one. ``activation`` is ``none`` (outputs must already be probabilities), ``sigmoid`` or
    ``softmax`` (applied by segdiff to raw logits).
    """

    output: str | None = None
    activation: Literal["none", "sigmoid", "softmax"] = "none"

    def __post_init__(self) -> None:
        if self.activation not in ("none", "sigmoid", "softmax"):
            raise ConfigError(
                f"activation must be none, sigmoid or softmax, not {self.activation!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "activation": self.activation}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutputSelection:
        return cls(output=data.get("output"), activation=data.get("activation", "none"))
