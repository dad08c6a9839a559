"""The knob registry: every setting of a run configuration, written once.

A knob is a setting that can change a probability map (the device, the batch, XLA, …). Its
entry here says everything the front ends and the analysis need to know about it: its name
(the :class:`~segdiff_gui.core.config.RunConfig` field and the ``--config`` key), its default,
how its values are written and parsed, its fragment of a run's label, whether TensorFlow reads
it once per process, what it changes (tooltips), where TensorFlow documents it, and the
one-knob-at-a-time variants the matrix editor offers. Labels, ``--config`` parsing and help,
the matrix editor, attribution, diagnosis and the planner's grouping all read this registry; a
new knob is one entry here (and its field on ``RunConfig``, which a test holds to this list).

The order of the registry is the order of labels and of the attribution's cumulative path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.knob_kinds import (
    Knob,
    Variant,
    at_least,
    check_device,
    check_layer_names,
    choice,
    layer_names_spec,
    parse_count,
    parse_layer_names,
    switch,
    unforced_choice,
    unforced_switch,
)
from segdiff_gui.core.limits import MAX_BATCH
from segdiff_gui.core.runtimes import (
    EXACT_PRECISION,
    GRAPH_OPTIMIZATION_LEVELS,
    OPENVINO_PRECISIONS,
    RUNTIME_NAMES,
    RUNTIMES,
)
from segdiff_gui.core.tf32 import ROUNDING as TF32_ROUNDING

__all__ = ["EXACT_PRECISION", "KNOBS", "Knob", "KnobRegistry", "Variant", "choice", "switch"]

_DOCS = "https://www.tensorflow.org/"


def _kept_fragment(layers: tuple[str, ...]) -> str:
    """``f32:dec1_2+mask`` in a label; many layers by their count and a digest of the names."""
    if not layers:
        return ""
    if len(layers) <= 3 and sum(map(len, layers)) <= 60:
        return "f32:" + "+".join(layers)
    digest = hashlib.sha256("+".join(layers).encode()).hexdigest()[:4]
    return f"f32×{len(layers)}#{digest}"


KNOBS_IN_ORDER: tuple[Knob, ...] = (
    choice(
        "runtime",
        RUNTIME_NAMES,
        title="the runtime",
        tooltip="What runs the model: TensorFlow, Keras 3's JAX or PyTorch backend (the same "
        "file, other kernels), or the model converted for deployment: LiteRT (float32, "
        "float16 weights, dynamic-range or full int8) or ONNX Runtime. Own process (LiteRT's "
        "four conversions share one).",
        link=RUNTIMES["jax"].link,
        process_level=True,
        advise_keeping=True,
        shown=lambda value: RUNTIMES[value].title,
        describe=lambda value: f"runtime {RUNTIMES[value].title}",
        aliases=("backend",),
        keyed_at_default=False,
        # A checkbox for each runtime but the default, as its entry says it.
        variants=tuple(
            Variant(runtime.checkbox, runtime.name, runtime.checkbox_tip)
            for runtime in RUNTIMES.values()
            if runtime.checkbox
        ),
    ),
    Knob(
        "device",
        "cpu",
        "cpu|gpu:N",
        title="the device",
        tooltip="Where the model runs; a missing GPU fails its runs (never a silent fall-back "
        "to the CPU).",
        parse=lambda _name, text: text.strip().lower(),
        check=check_device,
        fragment=str,
        link=_DOCS + "guide/gpu",
        advise_keeping=True,
        describe=lambda value: f"device {value}",
    ),
    Knob(
        "batch",
        1,
        "N",
        title="the batch",
        tooltip="The batch size the target is inferred in: batched kernels sum in other orders.",
        parse=parse_count,
        check=at_least(1, MAX_BATCH),
        fragment=lambda value: f"b{value}",
        link=_DOCS + "api_docs/python/tf/keras/Model#predict",
        advise_keeping=True,
        aliases=("bs",),
        describe=lambda value: f"batch {value}",
        builds_forward=False,  # a new input shape compiles again: the child counts it
    ),
    choice(
        "context",
        ("set", "copies"),
        title="the batch context",
        tooltip="What fills a batch beside the target: the other images of the set, or copies "
        "of the target.",
        part_of="batch",
        builds_forward=False,
    ),
    Knob(
        "position",
        0,
        "K",
        title="the target's position in the batch",
        tooltip="The index of the target inside its batch.",
        parse=parse_count,
        check=at_least(0, None),
        fragment=lambda value: f"pos{value}" if value else "",
        part_of="batch",
        builds_forward=False,
    ),
    switch(
        "determinism",
        False,
        on="det",
        title="op determinism",
        tooltip="Op determinism (tf.config.experimental.enable_op_determinism): repeats on a "
        "GPU agree bit for bit, usually slower. Own process.",
        link=_DOCS + "api_docs/python/tf/config/experimental/enable_op_determinism",
        process_level=True,
        variants=(Variant("determinism", True, ""),),
        aliases=("deterministic",),
    ),
    switch(
        "tf32",
        True,
        off="tf32-off",
        title="TF32",
        tooltip="TensorFloat-32 on Ampere+ GPUs (TensorFlow's default is on); no effect on CPUs. "
        "Own process: cuDNN's autotuning remembers algorithms per process without it.",
        link=_DOCS + "api_docs/python/tf/config/experimental/enable_tensor_float_32_execution",
        # TensorFlow's autotune cache is keyed without TF32: in a shared child a tf32=off run
        # could reuse an algorithm chosen under tf32=on.
        process_level=True,
        variants=(
            Variant(
                "TF32 off",
                False,
                "Off: float32 matmuls and convolutions keep their full mantissa.",
                gpu_only=True,
            ),
        ),
    ),
    unforced_switch(
        "onednn",
        on="onednn",
        off="onednn-off",
        runtime_default="TensorFlow's default",
        title="oneDNN",
        tooltip="oneDNN's CPU kernels (TF_ENABLE_ONEDNN_OPTS); they reorder the arithmetic. "
        "Default: not set, as in your own script: TensorFlow turns it on for CPUs with "
        "AVX-512 VNNI/BF16, AVX-VNNI or AMX and off elsewhere, and segdiff records which. "
        "Own process.",
        link=_DOCS + "install/pip#hardware_requirements",
        process_level=True,
        advise_keeping=True,
        variants=(
            Variant("oneDNN on", True, "On: TensorFlow's oneDNN CPU kernels, whatever the CPU."),
            Variant("oneDNN off", False, "Off: CPU kernels without oneDNN."),
        ),
    ),
    Knob(
        "threads",
        0,
        "N",
        title="the intra-op thread count",
        tooltip="Intra-op threads (0: TensorFlow's default); fewer threads sum in fewer pieces. "
        "Own process (LiteRT, ONNX Runtime and OpenVINO: a session option, in the runtime's "
        "child).",
        parse=parse_count,
        check=at_least(0, None, " (TensorFlow's default)"),
        fragment=lambda value: f"threads{value}" if value else "",
        shown=lambda value: str(value) if value else "default",
        link=_DOCS + "api_docs/python/tf/config/threading/set_intra_op_parallelism_threads",
        process_level=True,
        advise_keeping=True,
        variants=(Variant("1 thread", 1, "One thread: the CPU sums in one order."),),
        describe=lambda value: (
            f"{value} intra-op thread{'' if value == 1 else 's'}"
            if value
            else "the default intra-op thread count"
        ),
    ),
    unforced_switch(
        "xla",
        on="xla",
        off="xla-off",
        runtime_default="model.predict's choice",
        title="XLA",
        tooltip="Compile the forward pass with XLA (jit_compile=True): fused kernels round "
        "differently. Default: as your model.predict decides (Keras's jit_compile='auto'): "
        "with XLA under JAX, and under TensorFlow where it sees a GPU; segdiff records which.",
        link=_DOCS + "xla",
        advise_keeping=True,
        variants=(
            Variant("XLA", True, "On: one XLA computation, whatever model.predict would do."),
            Variant("no XLA", False, "Off: TensorFlow's graph or JAX op by op, without XLA."),
        ),
    ),
    choice(
        "precision",
        ("float32", "mixed_bfloat16", "mixed_float16", EXACT_PRECISION),
        short={
            "float32": "fp32",
            "mixed_bfloat16": "bf16",
            "mixed_float16": "fp16",
            EXACT_PRECISION: "fp64",
        },
        title="the precision policy",
        tooltip="The Keras dtype policy the model is rebuilt with; float64 is the exact "
        "reference: the float32 weights and input widened exactly, every layer in float64, "
        "the map stored in float64 (about 1e-16 relative error, far below a float32 step).",
        link=_DOCS + "guide/mixed_precision",
        advise_keeping=True,
        describe=str,
        variants=(
            Variant("bfloat16", "mixed_bfloat16", "Layers compute in bfloat16 (8-bit mantissa)."),
            Variant("float16", "mixed_float16", "Layers compute in float16 (10-bit mantissa)."),
            Variant(
                "exact (float64)",
                EXACT_PRECISION,
                "The exact reference: every layer in float64 (52-bit mantissa) on the float32 "
                "weights and input widened exactly; the map kept in float64.",
            ),
        ),
    ),
    Knob(
        "keep_float32",
        (),
        "LAYER+LAYER…",
        title="the layers kept in float32",
        tooltip="Layers that compute in float32 under a reduced precision policy (what "
        "'segdiff repair' finds): names as the layer probe gives them, joined by '+'.",
        parse=parse_layer_names,
        check=check_layer_names,
        fragment=_kept_fragment,
        shown=lambda value: "+".join(value) or "none",
        spec=lambda value: layer_names_spec(value) or "none",
        describe=lambda value: (
            f"float32 kept in {', '.join(value)}" if value else "no layer kept in float32"
        ),
        link=_DOCS + "guide/mixed_precision",
        part_of="precision",
        keyed_at_default=False,
    ),
    unforced_choice(
        "inference_precision",
        OPENVINO_PRECISIONS,
        runtime_default="OpenVINO's default",
        title="OpenVINO's inference precision",
        tooltip="The precision OpenVINO's CPU plugin computes a float32 model in "
        "(INFERENCE_PRECISION_HINT). Default: not set, as Keras's OpenVINO backend compiles "
        "it: bf16 on CPUs with AVX-512 BF16 or AMX, f32 elsewhere; segdiff reads back "
        "what the compiled model reports. bf16 where the CPU cannot is refused.",
        link="https://docs.openvino.ai/2024/openvino-workflow/running-inference/"
        "inference-devices-and-modes/cpu-device.html",
        fragment=lambda value: "" if value is None else f"infer-{value}",
        aliases=("infer_precision",),
        advise_keeping=True,
    ),
    unforced_choice(
        "xnnpack",
        ("on", "off"),
        runtime_default="the interpreter's default",
        title="LiteRT's XNNPACK delegate",
        tooltip="Whether LiteRT's interpreter runs the model through XNNPACK, its default CPU "
        "delegate, or its own builtin kernels (off), which sum in another order. Default: not "
        "set, as your Interpreter(...) leaves it (XNNPACK applied); segdiff reads back whether "
        "the interpreter delegated the graph to it.",
        link="https://ai.google.dev/edge/litert/models/delegates",
        fragment=lambda value: "" if value is None else f"xnnpack-{value}",
    ),
    unforced_choice(
        "graph_optimization",
        GRAPH_OPTIMIZATION_LEVELS,
        runtime_default="ONNX Runtime's default",
        title="ONNX Runtime's graph optimisation level",
        tooltip="How far ONNX Runtime rewrites the graph before it runs (fused and "
        "rearranged nodes round differently): disable, basic, extended, layout or all. "
        "Default: not set, as your InferenceSession(...) leaves it (all); segdiff reads back "
        "the level of the session that computed the run.",
        link="https://onnxruntime.ai/docs/performance/model-optimizations/graph-optimizations.html",
        fragment=lambda value: "" if value is None else f"ort-opt-{value}",
        aliases=("ort_optimization",),
    ),
    choice(
        "emulate",
        ("off", "tf32"),
        short={"tf32": "emu-tf32"},
        title="the TF32 emulation",
        tooltip="TF32 emulated on this CPU (emulate=tf32): every convolution's and matrix "
        "multiply's inputs and weights rounded to TF32 (10 mantissa bits: "
        f"{TF32_ROUNDING}) and summed in float32, as the tensor cores of an Ampere or later GPU "
        "do with TF32 on: a prediction of what TF32 does to the maps where no GPU is at hand, "
        "never a GPU run. Depthwise convolutions are left alone (not on tensor cores). "
        "Keras on TensorFlow, JAX or PyTorch, on the CPU, in float32.",
        link=_DOCS + "api_docs/python/tf/config/experimental/enable_tensor_float_32_execution",
        shown=lambda value: "TF32 (emulated)" if value == "tf32" else "off",
        describe=lambda value: (
            "TF32 emulated on this CPU" if value == "tf32" else "no TF32 emulation"
        ),
        keyed_at_default=False,
        variants=(
            Variant(
                "TF32 emulated",
                "tf32",
                "Predicts a GPU's TF32 on this CPU: convolution and matmul inputs rounded to "
                "TF32, summed in float32 (an emulation, not a GPU run).",
                cpu_only=True,
            ),
        ),
    ),
    choice(
        "repeat_scope",
        ("process", "fresh"),
        title="where repeats run",
        tooltip="Repeats in one process (atomics can differ) or each in a fresh process (a "
        "fresh process autotunes again and may choose other GPU kernels).",
        # NVIDIA's notes on run-to-run variation: autotuning's choice per process among it.
        link="https://github.com/NVIDIA/framework-reproducibility",
        process_level=True,
        aliases=("scope",),
        describe=lambda value: (
            "repeats in fresh processes" if value == "fresh" else "repeats in one process"
        ),
        variants=(
            Variant(
                "fresh processes",
                "fresh",
                "Each repeat in its own new process: shows what a rerun of the program changes.",
            ),
        ),
        keyed_at_default=False,
    ),
)


@dataclass(frozen=True)
class KnobRegistry:
    """The knobs of a run configuration, in label and attribution order."""

    knobs: tuple[Knob, ...]
    _by_name: dict[str, Knob] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {}
        for knob in self.knobs:
            for name in (knob.name, *knob.aliases):
                if name in by_name:
                    raise ValueError(f"two knobs are called {name!r}")
                by_name[name] = knob
        object.__setattr__(self, "_by_name", by_name)

    def __iter__(self) -> Iterator[Knob]:
        return iter(self.knobs)

    def __getitem__(self, name: str) -> Knob:
        return self._by_name[name]

    def with_knob(self, knob: Knob) -> KnobRegistry:
        """This registry and one knob more (last in every order)."""
        return replace(self, knobs=(*self.knobs, knob))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(knob.name for knob in self.knobs)

    def default(self, name: str) -> Any:
        return self[name].default

    def normalise(self, config: Any) -> None:
        """Check and normalise every knob of a (frozen) configuration in place."""
        for knob in self.knobs:
            value = knob.check(knob.name, getattr(config, knob.name))
            object.__setattr__(config, knob.name, value)

    def parse(self, spec: str) -> dict[str, Any]:
        """``device=cpu,batch=64,xla=on`` → the values it names (unnamed knobs are absent)."""
        values: dict[str, Any] = {}
        items = [part.strip() for part in spec.split(",") if part.strip()]
        if not items:
            raise ConfigError("an empty configuration; give key=value pairs such as batch=64")
        for item in items:
            if "=" not in item:
                raise ConfigError(f"config item {item!r} is not key=value")
            key, text = (s.strip() for s in item.split("=", 1))
            knob = self._by_name.get(key.lower())
            if knob is None:
                valid = ", ".join(self.names)
                raise ConfigError(f"unknown config key {key!r} (valid keys: {valid})")
            if knob.name in values:
                raise ConfigError(f"config {spec!r} gives {knob.name} twice")
            values[knob.name] = knob.parse(knob.name, text)
        return values

    def label(self, config: Any) -> str:
        """Short human label naming only what differs from the defaults: ``cpu b64 xla``."""
        parts = (knob.fragment(getattr(config, knob.name)) for knob in self.knobs)
        return " ".join(part for part in parts if part)

    def spec(self, config: Any) -> str:
        """The ``key=value`` spec :meth:`parse` turns back into ``config``."""
        return ",".join(f"{k.name}={k.spec(getattr(config, k.name))}" for k in self.knobs)

    def changed_spec(self, config: Any) -> str:
        """The ``key=value`` spec of only the knobs away from their defaults (``batch=1``
        when none is: a spec must name something)."""
        changed = [
            f"{k.name}={k.spec(getattr(config, k.name))}"
            for k in self.knobs
            if getattr(config, k.name) != k.default
        ]
        return ",".join(changed) or "batch=1"

    def help(self) -> str:
        """What ``--config`` accepts, for help texts."""
        return ", ".join(f"{knob.name}={knob.values}" for knob in self.knobs)

    def stored(self, values: dict[str, Any]) -> dict[str, Any]:
        """A configuration's values as stored and keyed: all of them, less the knobs at a
        default that came after caches existed (:attr:`Knob.keyed_at_default`)."""
        omitted = {
            knob.name
            for knob in self.knobs
            if not knob.keyed_at_default and values.get(knob.name) == knob.default
        }
        return {name: value for name, value in values.items() if name not in omitted}

    def _in_process(self, knob: Knob, config: Any) -> bool:
        """Whether ``knob`` is set once per process for ``config``: a process-level knob but
        where its runtime sets it on each session (``Runtime.per_session``)."""
        return knob.process_level and knob.name not in config.runtimes[config.runtime].per_session

    def process_settings(self, config: Any) -> tuple[object, ...]:
        """The engine module that runs ``config`` and the knobs its runtime reads once per
        process: equal values may share a child (the runtimes of a module that opens each
        run's session for its runtime, ``runtime`` in ``Runtime.per_session``, share one)."""
        engine = config.runtimes[config.runtime].engine
        return (
            engine,
            *(getattr(config, k.name) for k in self.knobs if self._in_process(k, config)),
        )

    def forward_key(self, config: Any) -> tuple[tuple[str, object], ...]:
        """What a child's forward pass (or a converted runtime's session) for ``config`` is
        built for: every knob set at run time (the process-level ones are equal within a
        child) but those that only fill the batch. A child keeps one compiled forward pass
        per key, so two configurations share one only where every such knob agrees."""
        return tuple(
            (knob.name, getattr(config, knob.name))
            for knob in self.knobs
            if knob.builds_forward and not self._in_process(knob, config)
        )

    def groups(self) -> tuple[tuple[Knob, tuple[str, ...]], ...]:
        """The attributed knobs, in path order, each with the fields it carries (the batch
        carries its context and the target's position: they mean nothing apart from it)."""
        return tuple(
            (knob, (knob.name, *(k.name for k in self.knobs if k.part_of == knob.name)))
            for knob in self.knobs
            if knob.part_of is None
        )

    def shown(self, name: str, value: object) -> str:
        return self[name].shown(value)

    def variants(self) -> Iterator[tuple[Knob, Variant]]:
        for knob in self.knobs:
            for variant in knob.variants:
                yield knob, variant


KNOBS = KnobRegistry(KNOBS_IN_ORDER)
