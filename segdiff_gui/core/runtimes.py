"""The runtimes a model can run under, written once: Keras 3 on TensorFlow (the default), JAX
or PyTorch, and the model converted for deployment (issue 16): LiteRT in float32, with
float16 weights, dynamic-range int8 or full int8 (calibrated on the run's own images), and
ONNX Runtime. Each names the packages that must be installed, the extra that installs them,
the engine module that drives it, where it documents itself, and the knob values that mean
nothing under it (refused with one line, never silently ignored).

Qt-free and import-free: whether a runtime is installed is asked with ``find_spec``, which
imports nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RUNTIMES",
    "RUNTIME_NAMES",
    "Conversion",
    "Runtime",
    "calibration_set",
    "calibration_tag",
    "installed_runtimes",
    "refusal",
]


@dataclass(frozen=True)
class Conversion:
    """How a converted runtime's model is made from the Keras model (engine/conversion.py)."""

    format: str  # "litert" (a .tflite flatbuffer) or "onnx"
    quantization: str  # "float32", "float16", "dynamic-int8" or "int8"
    title: str  # in sentences: "dynamic-range int8"

    @property
    def calibrated(self) -> bool:
        """Full integer quantization measures activations on representative inputs: the
        run's own images (``calibration_set``), which are then part of its key."""
        return self.quantization == "int8"


@dataclass(frozen=True)
class Runtime:
    name: str  # the runtime knob's value, and Keras's backend name ("torch" for PyTorch)
    title: str  # in sentences: "JAX"
    package: str  # the module that must be importable
    extra: str  # pip install 'segdiff[EXTRA]' brings it ("" for the base install)
    engine: str  # the engine module that drives it
    link: str
    # (config) → why this configuration cannot run under this runtime, or "".
    refuses: Callable[[Any], str]
    conversion: Conversion | None = None
    # Modules the conversion needs besides ``package`` (TensorFlow converts; tf2onnx to ONNX).
    converters: tuple[str, ...] = ()

    def installed(self) -> bool:
        return all(
            importlib.util.find_spec(name) is not None for name in (self.package, *self.converters)
        )

    @property
    def family(self) -> str:
        """What runs it, whatever the conversion: "LiteRT" for all four LiteRT runtimes."""
        return "LiteRT" if self.conversion and self.conversion.format == "litert" else self.title

    @property
    def keras_backend(self) -> str:
        """The Keras backend its child sets: a converted model is made under TensorFlow."""
        return "tensorflow" if self.conversion else self.name


def _refuses_nothing(_config: Any) -> str:
    return ""


def _jax_refuses(config: Any) -> str:
    if config.onednn is False:
        return (
            "onednn=off means nothing under JAX: oneDNN is TensorFlow's CPU kernel switch and "
            "XLA's CPU backend has none (leave onednn at its default)"
        )
    if config.threads > 1:
        return (
            f"threads={config.threads} cannot be set under JAX: XLA's CPU backend runs on one "
            "thread (threads=1) or its own pool (threads=0)"
        )
    return ""


def _torch_refuses(config: Any) -> str:
    if config.xla:
        return (
            "xla=on means nothing under PyTorch: Keras runs a torch model eagerly, and "
            "torch.compile is not XLA (keep xla=off)"
        )
    return ""


def _converted_refuses(title: str, on_gpu: bool, switches: bool) -> Callable[[Any], str]:
    """What a converted model's runtime refuses: TensorFlow's own switches (XLA, oneDNN, a
    precision policy: the conversion is the precision), and, for LiteRT, the GPU and the
    switches it has no setting for (``switches``: the runtime maps determinism and TF32)."""

    def refuses(config: Any) -> str:
        if config.xla:
            return (
                f"xla=on means nothing under {title}: the converted model runs in its own "
                "kernels, not TensorFlow's (keep xla=off)"
            )
        if config.onednn is False:
            return (
                f"onednn=off means nothing under {title}: oneDNN is TensorFlow's CPU kernel "
                "switch (leave onednn at its default)"
            )
        if config.keep_float32:
            return (
                f"keep_float32 means nothing under {title}: it keeps Keras layers in float32 "
                "under a mixed-precision policy, and the conversion sets the model's precision"
            )
        if config.precision != "float32":
            return (
                f"precision={config.precision} means nothing under {title}: the conversion "
                "sets the model's precision (runtime=litert-fp16 for float16 weights, "
                "litert-dynamic-int8 or litert-int8 for int8)"
            )
        if config.is_gpu and not on_gpu:
            return (
                f"{config.device} cannot run {title} here: LiteRT's GPU delegate is built for "
                "Android and iOS, not for this Python package (device=cpu)"
            )
        if not switches and config.determinism:
            return (
                f"determinism=on means nothing under {title}: it has no determinism switch "
                "(keep determinism=off)"
            )
        if not switches and not config.tf32:
            return f"tf32=off means nothing under {title}: it runs on the CPU (keep tf32=on)"
        return ""

    return refuses


_LITERT_DOCS = "https://ai.google.dev/edge/litert/models/"


def _litert(name: str, quantization: str, title: str, link: str) -> Runtime:
    full = f"LiteRT {title}"
    return Runtime(
        name,
        full,
        "ai_edge_litert",
        "litert",
        "segdiff_gui.engine.backends.litert",
        _LITERT_DOCS + link,
        _converted_refuses(full, on_gpu=False, switches=False),
        Conversion("litert", quantization, title),
        converters=("tensorflow",),
    )


RUNTIMES_IN_ORDER: tuple[Runtime, ...] = (
    Runtime(
        "tensorflow",
        "TensorFlow",
        "tensorflow",
        "",
        "segdiff_gui.engine.backends.tensorflow",
        "https://www.tensorflow.org/guide/gpu",
        _refuses_nothing,
    ),
    Runtime(
        "jax",
        "JAX",
        "jax",
        "jax",
        "segdiff_gui.engine.backends.jax",
        "https://keras.io/getting_started/#configuring-your-backend",
        _jax_refuses,
    ),
    Runtime(
        "torch",
        "PyTorch",
        "torch",
        "torch",
        "segdiff_gui.engine.backends.torch",
        "https://keras.io/getting_started/#configuring-your-backend",
        _torch_refuses,
    ),
    _litert("litert", "float32", "float32", "convert_tf"),
    _litert("litert-fp16", "float16", "float16 weights", "post_training_float16_quant"),
    _litert(
        "litert-dynamic-int8", "dynamic-int8", "dynamic-range int8", "post_training_quantization"
    ),
    _litert("litert-int8", "int8", "full int8", "post_training_integer_quant"),
    Runtime(
        "onnxruntime",
        "ONNX Runtime",
        "onnxruntime",
        "onnx",
        "segdiff_gui.engine.backends.onnxruntime",
        "https://onnxruntime.ai/docs/api/python/api_summary.html",
        _converted_refuses("ONNX Runtime", on_gpu=True, switches=True),
        Conversion("onnx", "float32", "float32"),
        converters=("tensorflow", "tf2onnx"),
    ),
)
RUNTIMES = {runtime.name: runtime for runtime in RUNTIMES_IN_ORDER}
RUNTIME_NAMES = tuple(RUNTIMES)


def refusal(config: Any) -> str:
    """Why ``config`` cannot run under its runtime ("" when it can)."""
    return RUNTIMES[config.runtime].refuses(config)


def installed_runtimes(one_per_engine: bool = False) -> tuple[Runtime, ...]:
    """The runtimes this Python can run; ``one_per_engine``: the first of each engine module
    (LiteRT's four conversions see the same devices: one probe tells for all)."""
    installed = [runtime for runtime in RUNTIMES_IN_ORDER if runtime.installed()]
    if one_per_engine:
        installed = list({runtime.engine: runtime for runtime in reversed(installed)}.values())
        installed.reverse()
    return tuple(installed)


def calibration_set(image_hashes: Sequence[str], limit: int) -> list[str]:
    """The images a full-int8 conversion is calibrated on, as their hashes: the request's
    distinct images, in hash order (so neither their order nor a shard changes them), at most
    ``limit`` of them spread evenly. A run's key includes them: other images, other model."""
    distinct = sorted(set(image_hashes))
    if len(distinct) <= limit:
        return distinct
    step = len(distinct) / limit
    return [distinct[int(i * step)] for i in range(limit)]


def calibration_tag(image_hashes: Sequence[str]) -> str:
    """A full-int8 run's calibration set in its label: ``cal16#3fa2`` (16 images, and a digest
    of which): runs calibrated on other images are other models, never repeats of one."""
    digest = hashlib.sha256("+".join(image_hashes).encode()).hexdigest()[:4]
    return f"cal{len(image_hashes)}#{digest}"
