"""The runtimes a model can run under, written once: Keras 3 on TensorFlow (the default), JAX
or PyTorch, the model converted for deployment: LiteRT in float32, with
float16 weights, dynamic-range int8 or full int8 (calibrated on the run's own images), and
ONNX Runtime, and Keras 2 (``tf_keras``) on TensorFlow, as a Keras 2 user's script runs it.
Each names the packages that must be installed, the extra that installs them, the engine
module that drives it, where it documents itself, and the knob values that mean nothing under
it (refused with one line, never silently ignored).

Qt-free and import-free: whether a runtime is installed is asked with ``find_spec``, which
imports nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "EXACT_PRECISION",
    "GRAPH_OPTIMIZATION_LEVELS",
    "OPENVINO_PRECISIONS",
    "RUNTIMES",
    "RUNTIME_NAMES",
    "JAX_DETERMINISM_FLAG",
    "Conversion",
    "Limit",
    "Runtime",
    "calibration_set",
    "calibration_tag",
    "installed_runtimes",
    "recorded_version",
    "refusal",
]


# The precision of the exact reference: the Keras model computed in float64 on its
# float32 weights and input widened exactly, its map stored as float64. The runtimes that run
# the Keras model itself take it; a converted model computes as it was converted.
EXACT_PRECISION = "float64"

# The precisions OpenVINO's CPU plugin can be asked to infer a float32 model in
# (``INFERENCE_PRECISION_HINT``, as OpenVINO writes them); unset, it chooses by the CPU
# (core/runtime_defaults.py).
OPENVINO_PRECISIONS = ("f32", "bf16")

# ONNX Runtime's graph optimisation levels (``GraphOptimizationLevel``: ORT_DISABLE_ALL,
# ORT_ENABLE_BASIC, …), as the ``graph_optimization`` knob writes them; unset, its session's
# default (all).
GRAPH_OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "layout", "all")


@dataclass(frozen=True)
class Conversion:
    """How a converted runtime's model is made from the Keras model (engine/conversion.py)."""

    format: str  # "litert" (a .tflite flatbuffer) or "onnx"
    quantization: str  # "float32", "float16", "dynamic-int8" or "int8"
    title: str  # in sentences: "dynamic-range int8"

    @property
    def suffix(self) -> str:
        """The converted model's file suffix."""
        return ".tflite" if self.format == "litert" else ".onnx"

    @property
    def fixes_input_size(self) -> bool:
        """LiteRT's converter needs every dimension but the batch known (a Conv2D of unknown
        input channels has no builtin kernel): a model of free input size is converted for the
        size of the images it runs, one artefact per size, the size in its key. ONNX keeps the
        model's free sizes: one artefact serves every size."""
        return self.format == "litert"

    @property
    def calibrated(self) -> bool:
        """Full integer quantization measures activations on representative inputs: the
        run's own images (``calibration_set``), which are then part of its key."""
        return self.quantization == "int8"


def _probe_reasons(facts: Mapping[str, Any]) -> str:
    """Why a runtime sees no GPU: the machine's reasons and its own log, as its probe found."""
    return "; ".join(facts.get("gpu_absent", [])) or "it reports no reason"


@dataclass(frozen=True, kw_only=True)
class Runtime:
    name: str  # the runtime knob's value, and Keras's backend name ("torch" for PyTorch)
    title: str  # in sentences: "JAX"
    package: str  # the module that must be importable
    extra: str  # pip install 'segdiff[EXTRA]' brings it ("" for the base install)
    engine: str  # the engine module that drives it
    link: str
    # The knobs it takes (each honoured, or read back): any other knob, one added to the
    # registry later included, is refused at a value other than its default, never ignored.
    takes: frozenset[str]
    # Knobs it takes at some values only (``Limit``), by name.
    limits: Mapping[str, Limit] = field(default_factory=dict)
    # Process-level knobs (TensorFlow reads them once per process) that this runtime sets on
    # each session it opens instead (LiteRT's interpreter, ONNX Runtime's session options):
    # runs that differ only in them share a child, and each builds its own session, as a
    # run-time knob builds its own forward pass (``KnobRegistry.process_settings``,
    # ``forward_key``). ``runtime`` among them: the runtimes of this engine module (which
    # share one pre-import environment) open their sessions in one child, each run on its
    # own runtime's (LiteRT's four conversions: one TensorFlow import converts them all).
    per_session: frozenset[str] = frozenset()
    conversion: Conversion | None = None
    # Modules the conversion needs besides ``package`` (TensorFlow converts; tf2onnx to ONNX).
    converters: tuple[str, ...] = ()
    # The matrix editor's checkbox for a run under it, and what the checkbox says it does
    # ("" for the default runtime, which every other run is already under).
    checkbox: str = ""
    checkbox_tip: str = ""
    # (settings, uses a GPU, inherited keyed variables) → the variables its child sets
    # before the runtime is imported. Every entry says it: none falls back to another's.
    environment: Callable[[Any, bool, Mapping[str, str]], dict[str, str]]
    # (a probe's facts) → its build, in a phrase.
    build: Callable[[Mapping[str, Any]], str]
    # (a probe's facts, where it saw no GPU) → why, as ``segdiff devices`` says it.
    no_gpu: Callable[[Mapping[str, Any]], str] = _probe_reasons
    # Which Keras loads and calls the model: 3 (``keras``, on the backend ``keras_backend``
    # names), or 2 (the ``tf_keras`` package on TensorFlow, as a ``TF_USE_LEGACY_KERAS=1``
    # script's ``model.predict``): a ``.h5``, a Keras 2 SavedModel or a ``.keras`` tf_keras
    # wrote; a Keras 3 ``.keras`` it cannot read (runner/plan.py says so before any child).
    keras: int = 3

    def refusal(self, config: Any) -> str:
        """Why ``config`` (a configuration of every knob) cannot run under this runtime, in
        one line, or "": a limited knob outside its values, or a knob it does not take away
        from its default. The first such knob in the registry's order is named."""
        for knob in fields(config):
            value = getattr(config, knob.name)
            limit = self.limits.get(knob.name)
            if limit is not None and not limit.allows(value):
                return limit.says(value, self.title)
            if knob.name not in self.takes and value != knob.default:
                written = config.knobs[knob.name].spec(value)  # as --config writes it
                return (
                    f"{knob.name}={written} means nothing under {self.title}: it has no such "
                    f"setting (leave {knob.name} at its default)"
                )
        return ""

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
        """The Keras 3 backend its child sets: a converted model is made under TensorFlow, and
        a Keras 2 child's Keras 3 (imported, not used for the model) is TensorFlow's too."""
        return "tensorflow" if self.conversion or self.keras == 2 else self.name

    @property
    def tensorflow_kernels(self) -> bool:
        """Whether TensorFlow's own kernels compute the model (Keras 3's TensorFlow backend, or
        Keras 2): oneDNN's default and TensorFlow's switches are its."""
        return self.keras_backend == "tensorflow" and self.conversion is None


# The knobs every runtime takes: which model, where, in which batch, in which process.
_EVERY_RUNTIME = frozenset({"runtime", "device", "batch", "context", "position", "repeat_scope"})
# Keras's own: its precision policy and the layers kept in float32, and XLA's compilation.
_KERAS = frozenset({"precision", "keep_float32", "xla"})
# The process's numerics switches, as TensorFlow names them (each runtime maps its own).
_SWITCHES = frozenset({"determinism", "tf32", "onednn", "threads"})
# A GPU's TF32 emulated on the CPU in the Keras backend's ops (engine/tf32_emulation.py).
_EMULATION = frozenset({"emulate"})


@dataclass(frozen=True)
class Limit:
    """A knob a runtime takes at some values only: which, and the one line said otherwise
    (it is given the value and the runtime's title)."""

    allows: Callable[[Any], bool]
    says: Callable[[Any, str], str]


def _means_nothing(setting: str, why: str) -> Callable[[Any, str], str]:
    """The line for a value that means nothing under a runtime: ``{setting} means nothing
    under {title}: {why}``."""
    return lambda _value, title: f"{setting} means nothing under {title}: {why}"


def _xla_off(why: str) -> Limit:
    return Limit(lambda xla: not xla, _means_nothing("xla=on", why))


def _onednn_unset(why: str) -> Limit:
    """oneDNN left to the runtime: forced either way, it is a switch the runtime has not."""
    return Limit(
        lambda onednn: onednn is None,
        lambda onednn, title: (
            f"onednn={'on' if onednn else 'off'} means nothing under {title}: {why}"
        ),
    )


def _cpu_only(why: str) -> Limit:
    return Limit(
        lambda device: not str(device).startswith("gpu"),
        lambda device, title: f"{device} cannot run {title} here: {why} (device=cpu)",
    )


def _float32_only(why: str) -> Limit:
    def says(precision: str, title: str) -> str:
        if precision == EXACT_PRECISION:
            return (
                f"precision={precision} means nothing under {title}: the exact reference "
                "computes the Keras model itself in float64, under TensorFlow, JAX or PyTorch "
                "(runtime=tensorflow)"
            )
        return f"precision={precision} means nothing under {title}: {why}"

    return Limit(lambda precision: precision == "float32", says)


def _no_emulation(why: str) -> Limit:
    """Emulated TF32 rounds the ops of Keras's TensorFlow, JAX and PyTorch backends
    (engine/tf32_emulation.py): another runtime refuses it in one line, saying why."""
    return Limit(
        lambda emulate: emulate == "off",
        lambda emulate, title: (
            f"emulate={emulate} means nothing under {title}: {why} (runtime=tensorflow, jax "
            "or torch)"
        ),
    )


_CONVERTED = {
    "emulate": _no_emulation(
        "the converted model runs in its own kernels, which segdiff does not round"
    ),
    "xla": _xla_off("the converted model runs in its own kernels, not TensorFlow's (keep xla=off)"),
    "onednn": _onednn_unset(
        "oneDNN is TensorFlow's CPU kernel switch (leave onednn at its default)"
    ),
    "keep_float32": Limit(
        lambda layers: not layers,
        _means_nothing(
            "keep_float32",
            "it keeps Keras layers in float32 under a mixed-precision policy, and the "
            "conversion sets the model's precision",
        ),
    ),
    "precision": _float32_only(
        "the conversion sets the model's precision (runtime=litert-fp16 for float16 weights, "
        "litert-dynamic-int8 or litert-int8 for int8)"
    ),
}
_JAX_LIMITS = {
    "onednn": _onednn_unset(
        "oneDNN is TensorFlow's CPU kernel switch and XLA's CPU backend has none (leave "
        "onednn at its default)"
    ),
    "threads": Limit(
        lambda threads: threads <= 1,
        lambda threads, _title: (
            f"threads={threads} cannot be set under JAX: XLA's CPU backend runs on one thread "
            "(threads=1) or its own pool (threads=0)"
        ),
    ),
}
_TORCH_LIMITS = {
    "xla": _xla_off(
        "Keras runs a torch model eagerly, and torch.compile is not XLA (keep xla=off)"
    ),
}
_LITERT_LIMITS = {
    **_CONVERTED,
    "device": _cpu_only(
        "LiteRT's GPU delegate is built for Android and iOS, not for this Python package"
    ),
    "determinism": Limit(
        lambda determinism: not determinism,
        _means_nothing("determinism=on", "it has no determinism switch (keep determinism=off)"),
    ),
    "tf32": Limit(
        lambda tf32: tf32, _means_nothing("tf32=off", "it runs on the CPU (keep tf32=on)")
    ),
}
_ONNX_LIMITS = _CONVERTED
_TF_KERAS_LIMITS = {
    "emulate": _no_emulation("Keras 2 calls TensorFlow's ops itself, which segdiff does not round"),
    "precision": Limit(
        lambda precision: precision != EXACT_PRECISION,
        _means_nothing(
            f"precision={EXACT_PRECISION}",
            "the exact reference computes the Keras model itself in float64, the same maths "
            "whichever Keras loads it (runtime=tensorflow)",
        ),
    ),
}
_OPENVINO_LIMITS = {
    "emulate": _no_emulation(
        "OpenVINO compiles the model into its own graph, whose ops segdiff does not round"
    ),
    "device": _cpu_only("Keras's OpenVINO backend runs on its CPU plugin"),
    "precision": _float32_only(
        "Keras's OpenVINO backend builds the model in float32, and OpenVINO's own precision "
        "is inference_precision=f32|bf16"
    ),
    "xla": _xla_off("OpenVINO compiles the model itself, not with XLA"),
}


# What each runtime's child sets before the runtime is imported (TensorFlow, JAX and the CUDA
# libraries read these once): pure functions of the child's process-level settings, whether a
# run of it uses a GPU, and the keyed variables it inherited (which it must keep).
JAX_DETERMINISM_FLAG = "--xla_gpu_deterministic_ops=true"
_JAX_ONE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _tensorflow_environment(
    settings: Any, _uses_gpu: bool, _inherited: Mapping[str, str]
) -> dict[str, str]:
    # oneDNN at its default is left as the user's environment has it (TensorFlow then
    # decides by the CPU): the child reads back what it got (core/runtime_defaults.py).
    values = {}
    if settings.onednn is not None:
        values["TF_ENABLE_ONEDNN_OPTS"] = "1" if settings.onednn else "0"
    if settings.determinism:
        values["TF_DETERMINISTIC_OPS"] = "1"
    if settings.threads:
        values["TF_NUM_INTRAOP_THREADS"] = str(settings.threads)
    return values


def _jax_environment(settings: Any, uses_gpu: bool, inherited: Mapping[str, str]) -> dict[str, str]:
    flags = [inherited.get("XLA_FLAGS", "")]
    if settings.determinism:
        flags.append(JAX_DETERMINISM_FLAG)
    if settings.threads == 1:
        flags.append(_JAX_ONE_THREAD_FLAGS)
    values = {"XLA_FLAGS": " ".join(flag for flag in flags if flag)}
    if not uses_gpu:
        values["JAX_PLATFORMS"] = "cpu"  # a CPU-only child never opens a GPU
    return values


def _torch_environment(
    settings: Any, _uses_gpu: bool, _inherited: Mapping[str, str]
) -> dict[str, str]:
    # cuBLAS is deterministic only with a fixed workspace, set before CUDA starts:
    # torch.use_deterministic_algorithms raises on a GPU matmul without it.
    return {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"} if settings.determinism else {}


def _conversion_environment(
    _settings: Any, _uses_gpu: bool, _inherited: Mapping[str, str]
) -> dict[str, str]:
    # TensorFlow only converts here (on its defaults); the runtime's own settings are
    # session options (engine/backends/litert.py, onnxruntime.py).
    return {"TF_ENABLE_ONEDNN_OPTS": "1"}


def _no_environment(
    _settings: Any, _uses_gpu: bool, _inherited: Mapping[str, str]
) -> dict[str, str]:
    return {}  # its settings are the compiled model's properties, set after import


# The build a probe found, in the phrase ``segdiff devices`` and the window show after the
# runtime's name and version ("built for CUDA 12.3, cuDNN 8"), from its facts.
def _cuda_build(facts: Mapping[str, Any]) -> str:
    if facts.get("cuda_build"):
        return f"built for CUDA {facts.get('cuda_version')}, cuDNN {facts.get('cudnn_version')}"
    return "CPU-only build"


def _jax_build(facts: Mapping[str, Any]) -> str:
    platforms = ", ".join(facts.get("jax_platforms", []))
    return f"jaxlib {facts.get('jaxlib_version')}, platforms {platforms}"


def _openvino_build(facts: Mapping[str, Any]) -> str:
    build = str(facts.get("openvino_build", "")).split("-releases", 1)[0]
    text = f"build {build}, CPU plugin" if build else "CPU plugin"
    if precision := facts.get("openvino_default_precision"):  # its default depends on the CPU
        text += f", inferring in {precision} by default here (inference_precision=f32|bf16)"
    return text


def _tf_keras_environment(
    settings: Any, uses_gpu: bool, inherited: Mapping[str, str]
) -> dict[str, str]:
    # TensorFlow's own settings, and tf.keras as the Keras 2 user's script has it.
    return {**_tensorflow_environment(settings, uses_gpu, inherited), "TF_USE_LEGACY_KERAS": "1"}


def _tf_keras_build(facts: Mapping[str, Any]) -> str:
    return f"Keras 2 on TensorFlow {facts.get('tf_version')}, {_cuda_build(facts)}"


def _tensorflow_no_gpu(facts: Mapping[str, Any]) -> str:
    reasons = _probe_reasons(facts)
    return reasons if facts.get("cuda_build") else f"{reasons} (pip install 'segdiff[gpu]')"


def _litert_no_gpu(_facts: Mapping[str, Any]) -> str:
    return "its GPU delegate is built for Android and iOS, not for this package"


def _onnx_no_gpu(facts: Mapping[str, Any]) -> str:
    if "CUDAExecutionProvider" in facts.get("onnxruntime_providers", []):
        return _probe_reasons(facts)
    return "this onnxruntime has no CUDA execution provider (onnxruntime-gpu has)"


def _openvino_no_gpu(_facts: Mapping[str, Any]) -> str:
    return "segdiff runs it on its CPU plugin (its GPU plugin is for Intel GPUs)"


def _converted_build(facts: Mapping[str, Any]) -> str:
    providers = facts.get("onnxruntime_providers")
    return f"providers {', '.join(providers)}" if providers else "CPU, XNNPACK"


_LITERT_DOCS = "https://ai.google.dev/edge/litert/models/"


def _litert(
    name: str, quantization: str, title: str, link: str, checkbox: str, tip: str
) -> Runtime:
    full = f"LiteRT {title}"
    return Runtime(
        name=name,
        title=full,
        package="ai_edge_litert",
        extra="litert",
        engine="segdiff_gui.engine.backends.litert",
        link=_LITERT_DOCS + link,
        # The interpreter's thread count and delegate; its XLA, oneDNN and precision are the
        # conversion's.
        takes=_EVERY_RUNTIME | _KERAS | _SWITCHES | {"xnnpack"},
        limits=_LITERT_LIMITS,
        # Interpreter(num_threads=…), on the artefact of the run's own conversion: the four
        # share one child (one import of TensorFlow, which converts each).
        per_session=frozenset({"threads", "runtime"}),
        conversion=Conversion("litert", quantization, title),
        converters=("tensorflow",),
        checkbox=checkbox,
        checkbox_tip=tip,
        environment=_conversion_environment,
        build=_converted_build,
        no_gpu=_litert_no_gpu,
    )


RUNTIMES_IN_ORDER: tuple[Runtime, ...] = (
    Runtime(
        name="tensorflow",
        title="TensorFlow",
        package="tensorflow",
        extra="",
        engine="segdiff_gui.engine.backends.tensorflow",
        link="https://www.tensorflow.org/guide/gpu",
        takes=_EVERY_RUNTIME | _KERAS | _SWITCHES | _EMULATION,
        environment=_tensorflow_environment,
        build=_cuda_build,
        no_gpu=_tensorflow_no_gpu,
    ),
    Runtime(
        name="jax",
        title="JAX",
        package="jax",
        extra="jax",
        engine="segdiff_gui.engine.backends.jax",
        link="https://keras.io/getting_started/#configuring-your-backend",
        # mapped to XLA's flags and JAX's precision; TF32 emulated in its ops
        takes=_EVERY_RUNTIME | _KERAS | _SWITCHES | _EMULATION,
        limits=_JAX_LIMITS,
        checkbox="JAX",
        checkbox_tip="Keras 3 on JAX (needs segdiff's jax extra).",
        environment=_jax_environment,
        build=_jax_build,
    ),
    Runtime(
        name="torch",
        title="PyTorch",
        package="torch",
        extra="torch",
        engine="segdiff_gui.engine.backends.torch",
        link="https://keras.io/getting_started/#configuring-your-backend",
        # mapped to PyTorch's own switches; TF32 emulated in its ops
        takes=_EVERY_RUNTIME | _KERAS | _SWITCHES | _EMULATION,
        limits=_TORCH_LIMITS,
        checkbox="PyTorch",
        checkbox_tip="Keras 3 on PyTorch (needs segdiff's torch extra).",
        environment=_torch_environment,
        build=_cuda_build,
    ),
    _litert(
        "litert",
        "float32",
        "float32",
        "convert_tf",
        "LiteRT",
        "Converted to LiteRT, float32 (segdiff's litert extra).",
    ),
    _litert(
        "litert-fp16",
        "float16",
        "float16 weights",
        "post_training_float16_quant",
        "LiteRT fp16",
        "Converted to LiteRT with float16 weights.",
    ),
    _litert(
        "litert-dynamic-int8",
        "dynamic-int8",
        "dynamic-range int8",
        "post_training_quantization",
        "LiteRT int8 (dynamic)",
        "Converted to LiteRT, dynamic-range int8: int8 weights, float activations.",
    ),
    _litert(
        "litert-int8",
        "int8",
        "full int8",
        "post_training_integer_quant",
        "LiteRT int8",
        "Converted to LiteRT, full int8, calibrated on the run's own images.",
    ),  # fmt: skip
    Runtime(
        name="onnxruntime",
        title="ONNX Runtime",
        package="onnxruntime",
        extra="onnx",
        engine="segdiff_gui.engine.backends.onnxruntime",
        link="https://onnxruntime.ai/docs/api/python/api_summary.html",
        # Its session's determinism, TF32, thread count and graph optimisation level, and the
        # CUDA provider's GPUs.
        takes=_EVERY_RUNTIME | _KERAS | _SWITCHES | {"graph_optimization"},
        limits=_ONNX_LIMITS,
        # SessionOptions' intra_op_num_threads and use_deterministic_compute (its TF32 is the
        # CUDA provider's, kept per process as TensorFlow's is)
        per_session=frozenset({"threads", "determinism"}),
        conversion=Conversion("onnx", "float32", "float32"),
        converters=("tensorflow", "tf2onnx"),
        checkbox="ONNX Runtime",
        checkbox_tip="Converted to ONNX (segdiff's onnx extra).",
        environment=_conversion_environment,
        build=_converted_build,
        no_gpu=_onnx_no_gpu,
    ),
    Runtime(
        name="openvino",
        title="OpenVINO",
        package="openvino",
        extra="openvino",
        engine="segdiff_gui.engine.backends.openvino",
        link="https://keras.io/getting_started/#configuring-your-backend",
        # The same .keras file through Keras 3's OpenVINO backend (inference only): its own
        # graph compiler and CPU kernels, in the inference precision its CPU plugin chooses
        # (or is asked for), no XLA; none of TensorFlow's switches.
        # Its thread count is a compile_model property (INFERENCE_NUM_THREADS), set on each
        # compiled model: runs that differ in it share the child.
        takes=_EVERY_RUNTIME | {"xla", "precision", "inference_precision", "threads"},
        limits=_OPENVINO_LIMITS,
        per_session=frozenset({"threads"}),
        checkbox="OpenVINO",
        checkbox_tip="Keras 3 on OpenVINO, inference on its CPU plugin (segdiff's openvino extra).",
        environment=_no_environment,
        build=_openvino_build,
        no_gpu=_openvino_no_gpu,
    ),
    Runtime(
        name="tf_keras",
        title="tf_keras",
        package="tf_keras",
        extra="tf-keras",
        engine="segdiff_gui.engine.backends.tf_keras",
        link="https://keras.io/getting_started/#tensorflow--keras-2-backwards-compatibility",
        # TensorFlow's switches, XLA as jit_compile, a tf_keras mixed-precision policy; not
        # the exact reference (runtime=tensorflow computes it) nor emulated TF32.
        takes=_EVERY_RUNTIME | _KERAS | _SWITCHES,
        limits=_TF_KERAS_LIMITS,
        keras=2,
        checkbox="Keras 2",
        checkbox_tip="Keras 2 (tf_keras) on TensorFlow, as a TF_USE_LEGACY_KERAS=1 script's "
        "model.predict: a .h5 or a Keras 2 SavedModel (segdiff's tf-keras extra).",
        environment=_tf_keras_environment,
        build=_tf_keras_build,
        no_gpu=_tensorflow_no_gpu,
    ),
)
RUNTIMES = {runtime.name: runtime for runtime in RUNTIMES_IN_ORDER}
RUNTIME_NAMES = tuple(RUNTIMES)


def recorded_version(facts: Mapping[str, Any]) -> str:
    """The version of the runtime that computed a run, from its provenance or a probe's facts:
    the runtime's own (JAX's, LiteRT's), else TensorFlow's, which runs before ``runtime_version``
    was recorded stored alone. A converted run records both: the runtime's is the one shown."""
    return str(facts.get("runtime_version") or facts.get("tf_version") or "")


def refusal(config: Any) -> str:
    """Why ``config`` cannot run under its runtime ("" when it can)."""
    return RUNTIMES[config.runtime].refusal(config)


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
