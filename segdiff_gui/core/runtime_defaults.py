"""What a runtime does with a knob the user did not set, predicted before any child starts.

A run means what the user's own script computes: a knob left at its default is not forced,
it stays at the runtime's own default. Where that default depends on the machine, two machines
asking for "the default" compute different things, so the value in effect is part of the
run's key (:class:`DefaultsInEffect`). The parent predicts it here, without importing the
runtime; the child reads the value back and refuses a run whose prediction was wrong (it would
be stored under another computation's key).

oneDNN under TensorFlow is such a default. ``tensorflow/core/util/port.cc`` (``IsMklEnabled``)
turns it on, on Linux x86-64, where the CPU has neural-network instructions (AVX-512 VNNI or
BF16, AVX-VNNI, AMX), off elsewhere; ``TF_ENABLE_ONEDNN_OPTS`` in the user's environment
decides over that.

XLA is another: the user's ``model.predict`` compiles with XLA when Keras 3 resolves its
``jit_compile="auto"`` so (``keras/src/trainers/trainer.py``, ``_resolve_auto_jit_compile``
and ``model_supports_jit``): under JAX always; under TensorFlow where TensorFlow lists a device
other than a CPU (any GPU of the machine, whichever device the run is placed on), unless op
determinism is on or it is TensorFlow's Metal plug-in on an Apple CPU; under PyTorch never.
A SavedModel's own call never compiles by itself. Keras 2 (``runtime=tf_keras``) resolves no
"auto": its ``model.predict`` compiles with XLA only for a model compiled with
``jit_compile=True`` (``tf_keras/src/engine/training.py``, ``make_predict_function``), never
for one loaded without compiling, on any machine; oneDNN's default under it is TensorFlow's.
(Every other child loads with Keras 3: ``TF_USE_LEGACY_KERAS`` is set only in a tf_keras
child.) The parent cannot see a layer that
does not support XLA: the child reads Keras's own ``model.jit_compile`` back and refuses a
run whose prediction was wrong. (A model loaded without compiling resolves "auto"; a
``jit_compile`` saved in its compile settings is not read.)

OpenVINO's inference precision is a third. Keras's OpenVINO backend compiles a model with
``openvino.compile_model(model, "CPU")`` and no property, so the CPU plugin's own default
decides: in its default execution mode (``EXECUTION_MODE_HINT`` PERFORMANCE) it infers a
float32 model in bf16 on an x86-64 CPU with AVX-512 BF16 (``avx512_bf16``: Cooper Lake,
Sapphire Rapids and later, AMD Zen 4 and later), in f16 on an ARM CPU with half-precision
arithmetic, and in f32 elsewhere (``src/plugins/intel_cpu/src/config.cpp``,
``Config::readProperties``). The child reads the compiled model's
``INFERENCE_PRECISION_HINT`` back. Where this module cannot tell (no ``/proc/cpuinfo``
on an x86-64 CPU) nothing is predicted and the value is only recorded.

Every other knob's default means the same on every machine (threads: the runtime's own count;
TF32: TensorFlow's default on; determinism: off).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from typing import Any, TypeVar

from segdiff_gui.core.runtimes import RUNTIMES

_Config = TypeVar("_Config")

__all__ = [
    "DefaultsInEffect",
    "Machine",
    "keras_predict_compiles",
    "on_off",
    "inference_precision_in_effect",
    "onednn_in_effect",
    "openvino_precision_default",
    "session_settings_in_effect",
    "ONEDNN_CPU_FLAGS",
    "cpu_flags",
    "defaults_in_effect",
    "needs_accelerator_answer",
    "tensorflow_onednn_default",
]

# The /proc/cpuinfo flags that make TensorFlow turn oneDNN on by itself (port.cc).
ONEDNN_CPU_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off"}


@dataclass(frozen=True)
class DefaultsInEffect:
    """The values a run's defaults take on this machine, where they depend on it (``None``:
    the knob was set, or its default is the same everywhere)."""

    onednn: bool | None = None
    xla: bool | None = None  # whether model.predict compiles with XLA here
    inference_precision: str | None = None  # OpenVINO's CPU plugin's: "bf16", "f32", "f16"

    def to_dict(self) -> dict[str, Any]:
        """The keyed and stored form: only what was predicted (``{}`` keeps old keys)."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DefaultsInEffect:
        """What was stored, each value of its field's type (anything else is left out)."""
        kinds = {"onednn": bool, "xla": bool, "inference_precision": str}
        return cls(
            **{
                f.name: data[f.name]
                for f in fields(cls)
                if isinstance(data.get(f.name), kinds[f.name])
            }
        )

    def applied(self, config: _Config) -> _Config:
        """``config`` as it computes: its unset XLA as ``model.predict`` resolves it (the
        child compiles what the user's call would). oneDNN stays unset: the runtime keeps it."""
        if getattr(config, "xla", False) is None:
            return replace(config, xla=bool(self.xla))  # type: ignore[type-var]
        return config

    def mismatch(self, facts: Mapping[str, Any]) -> str:
        """What is wrong when the child's read-back ``facts`` disagree with the prediction
        (the run would be stored under another computation's key); "" when they agree."""
        if self.onednn is not None and facts.get("onednn_enabled") != self.onednn:
            got, planned = ("on", "off") if facts.get("onednn_enabled") else ("off", "on")
            return (
                f"oneDNN is {got} by default in this TensorFlow, but segdiff expected {planned} "
                "on this machine; set it explicitly (onednn=on or onednn=off)"
            )
        if self.xla is not None and facts.get("predict_jit") != self.xla:
            got, planned = ("with", "without") if facts.get("predict_jit") else ("without", "with")
            return (
                f"model.predict compiles this model {got} XLA here (Keras's jit_compile), but "
                f"segdiff expected {planned}; set it explicitly (xla=on or xla=off)"
            )
        # Known once OpenVINO has compiled the model: checked where the facts hold it.
        reported = facts.get("inference_precision")
        if self.inference_precision not in (None, reported) and reported is not None:
            return (
                f"OpenVINO's CPU plugin infers in {reported} by default here, but segdiff "
                f"expected {self.inference_precision} on this CPU; set it explicitly "
                "(inference_precision=f32 or bf16)"
            )
        return ""

    def sentence(self) -> str:
        """``oneDNN off: TensorFlow's default on this CPU``; "" when nothing was predicted."""
        said = []
        if self.onednn is not None:
            said.append(f"oneDNN {on_off(self.onednn)}: TensorFlow's default on this CPU")
        if self.xla is not None:
            said.append(f"XLA {on_off(self.xla)}: model.predict's choice on this machine")
        if self.inference_precision is not None:
            said.append(
                f"inference precision {self.inference_precision}: OpenVINO's default on this CPU"
            )
        return "; ".join(said)


@dataclass(frozen=True)
class Machine:
    """What the defaults depend on beyond the environment and the CPU: whether TensorFlow
    lists a device other than a CPU (asked of a child where the machine has GPU device files:
    runner/devices.py), and whether the model is a Keras model (a SavedModel folder's call
    does not compile by itself)."""

    tensorflow_accelerator: bool = False
    keras_model: bool = True


def on_off(value: bool) -> str:
    return "on" if value else "off"


@cache
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags as Linux names them ("" elsewhere): x86's ``flags``, ARM's
    ``Features``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _switch(text: str) -> bool | None:
    lowered = text.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


def tensorflow_onednn_default(
    environ: Mapping[str, str],
    flags: frozenset[str] | None = None,
    system: str | None = None,
    machine: str | None = None,
) -> bool:
    """Whether TensorFlow turns oneDNN on when nobody asks: the user's
    ``TF_ENABLE_ONEDNN_OPTS`` where set, else on for Linux x86-64 CPUs with the instructions
    of :data:`ONEDNN_CPU_FLAGS`, else off."""
    if (chosen := _switch(environ.get("TF_ENABLE_ONEDNN_OPTS", ""))) is not None:
        return chosen
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    if system != "Linux" or machine not in ("x86_64", "amd64"):
        return False
    present = cpu_flags() if flags is None else flags
    return any(flag in present for flag in ONEDNN_CPU_FLAGS)


def openvino_precision_default(
    flags: frozenset[str] | None = None,
    system: str | None = None,
    machine: str | None = None,
) -> str | None:
    """The precision OpenVINO's CPU plugin infers a float32 model in when nobody asks (the
    module's docstring says how it decides); ``None`` where it cannot be told from here."""
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    if system == "Darwin" and machine == "arm64":
        return "f16"  # every Apple CPU has ARMv8.2's half-precision arithmetic
    if system != "Linux":
        return None
    present = cpu_flags() if flags is None else flags
    if machine in ("x86_64", "amd64"):
        return "bf16" if "avx512_bf16" in present else "f32"
    if machine in ("aarch64", "arm64"):
        return "f16" if "asimdhp" in present else "f32"
    return None


def keras_predict_compiles(
    runtime: str,
    machine: Machine,
    determinism: bool,
    system: str | None = None,
    processor: str | None = None,
) -> bool | None:
    """Whether the user's ``model.predict`` compiles with XLA under ``runtime`` (Keras 3's
    ``jit_compile="auto"``, as the module's docstring says); ``None`` where XLA means nothing
    (PyTorch runs eagerly, a converted model in its own kernels), so their keys stay."""
    if runtime == "jax":
        return True
    if (known := RUNTIMES.get(runtime)) is not None and known.keras == 2:
        return False  # Keras 2's predict: jit_compile as the model was compiled, never "auto"
    if runtime != "tensorflow":
        return None
    if not machine.keras_model:
        return False
    if not machine.tensorflow_accelerator or determinism:
        return False
    system = system or platform.system()
    processor = (processor if processor is not None else platform.processor()).lower()
    return not (system == "Darwin" and "arm" in processor)  # the Metal plug-in: no XLA


def needs_accelerator_answer(config: Any) -> bool:
    """Whether ``config``'s defaults depend on TensorFlow's device list (ask only then)."""
    return config.runtime == "tensorflow" and config.xla is None and not config.determinism


def defaults_in_effect(
    config: Any, environ: Mapping[str, str], machine: Machine
) -> DefaultsInEffect:
    """What ``config``'s unset knobs will be in its child, where that depends on the machine."""
    onednn = None
    if RUNTIMES[config.runtime].tensorflow_kernels and config.onednn is None:
        onednn = tensorflow_onednn_default(environ)
    xla = None
    if config.xla is None:
        xla = keras_predict_compiles(config.runtime, machine, config.determinism)
    precision = None
    if config.runtime == "openvino" and config.inference_precision is None:
        precision = openvino_precision_default()
    return DefaultsInEffect(onednn=onednn, xla=xla, inference_precision=precision)


def _onednn_default_of(runtime: str) -> str:
    """Whose default oneDNN is under ``runtime``, in words ("" where it has no such switch)."""
    if runtime in RUNTIMES and RUNTIMES[runtime].tensorflow_kernels:
        return "TensorFlow's default on this CPU"
    return "PyTorch's default" if runtime == "torch" else ""


def onednn_in_effect(config: Any, runtime: str, enabled: bool | None) -> str:
    """What a stored run of ``runtime`` had, oneDNN ``enabled`` as its child read it back:
    ``off: TensorFlow's default on this CPU``, ``on: set (onednn=on)``; "" where the runtime
    has no oneDNN switch or nothing was recorded."""
    whose = _onednn_default_of(runtime)
    if not whose or enabled is None:
        return ""
    state = on_off(enabled)
    if config.onednn is None:
        return f"{state}: {whose}"
    return f"{state}: set (onednn={on_off(config.onednn)})"


def inference_precision_in_effect(config: Any, precision: str | None) -> str:
    """What a stored OpenVINO run computed in, ``precision`` as its child read it back from
    the compiled model: ``bf16: OpenVINO's default on this CPU``, ``f32: set
    (inference_precision=f32)``; "" where nothing was recorded (another runtime)."""
    if precision is None:
        return ""
    if config.inference_precision is None:
        return f"{precision}: OpenVINO's default on this CPU"
    return f"{precision}: set (inference_precision={config.inference_precision})"


# The settings a LiteRT, ONNX Runtime or OpenVINO session was left at or given, as its child
# read them back (the provenance attribute, its title, the knob, whose default it is).
_SESSION_SETTINGS = (
    ("litert_xnnpack", "XNNPACK", "xnnpack", "the interpreter's default"),
    ("onnxruntime_graph_optimization", "graph optimisation", "graph_optimization",
     "ONNX Runtime's default"),
    ("openvino_threads", "OpenVINO threads", "threads", "the CPU plugin's default"),
)  # fmt: skip


def session_settings_in_effect(config: Any, recorded: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What a stored run's session computed with, as its child read it back, each a title
    and its words: ``("XNNPACK", "on: the interpreter's default")``, ``("graph
    optimisation", "disable: set (graph_optimization=disable)")``; none for a runtime that
    recorded none."""
    said = []
    for attribute, title, knob, whose in _SESSION_SETTINGS:
        value = recorded.get(attribute)
        if value is None or isinstance(value, (dict, list)):
            continue
        text = on_off(value) if isinstance(value, bool) else str(value)
        asked = getattr(config, knob, None)
        if asked in (None, 0):
            said.append((title, f"{text}: {whose}"))
        else:
            written = on_off(asked) if isinstance(asked, bool) else asked
            said.append((title, f"{text}: set ({knob}={written})"))
    return said
