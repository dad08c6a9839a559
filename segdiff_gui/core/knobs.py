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

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.limits import MAX_BATCH
from segdiff_gui.core.runtimes import RUNTIME_NAMES, RUNTIMES

__all__ = ["KNOBS", "Knob", "KnobRegistry", "Variant"]

_TRUE = {"on", "true", "1", "yes"}
_FALSE = {"off", "false", "0", "no"}


@dataclass(frozen=True)
class Variant:
    """A one-knob-at-a-time run the matrix editor offers: a batch-1 run with this value."""

    label: str  # the checkbox: "XLA", "TF32 off"
    value: object
    tooltip: str  # what this value does, beyond the knob's own tooltip
    gpu_only: bool = False  # no effect on a CPU: not added for one (it would equal the plain run)


@dataclass(frozen=True)
class Knob:
    """One setting of a run configuration (see the module's docstring)."""

    name: str
    default: object
    values: str  # how --config help writes the values: "on|off", "N", "cpu|gpu:N"
    title: str  # in sentences: "op determinism", "the precision policy"
    tooltip: str
    parse: Callable[[str, str], object]  # (name, text) → value, raising ConfigError
    check: Callable[[str, Any], Any]  # (name, value) → the normalised value, or ConfigError
    fragment: Callable[[Any], str]  # the value's part of a run's label; "" says nothing
    shown: Callable[[Any], str] = str  # the value in sentences: "on", "default", "64"
    link: str = ""  # where TensorFlow documents it
    process_level: bool = False  # read by TensorFlow once per process: needs its own child
    part_of: str | None = None  # attributed with another knob (a batch's context and position)
    advise_keeping: bool = False  # "keep it as in the reference" is advice when it moves maps
    variants: tuple[Variant, ...] = ()
    aliases: tuple[str, ...] = ()  # other --config keys that mean this one
    spec: Callable[[Any], str] = str  # the value as --config writes it
    describe: Callable[[Any], str] | None = None  # "batch 1"; default: title and value
    choices: tuple[str, ...] = ()  # a knob of named values: them, the default first
    # A knob added after caches existed: at its default it is left out of a configuration's
    # stored and keyed form, so every run cached before it keeps its key.
    keyed_at_default: bool = True

    def setting_text(self, value: object) -> str:
        """The knob at ``value`` in a sentence: "XLA off", "batch 1", "cpu"."""
        return self.describe(value) if self.describe else f"{self.title} {self.shown(value)}"


def _parse_switch(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name} must be on or off, not {text!r}")


def _parse_count(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {text!r}") from None


def _on_off(value: object) -> str:
    return "on" if value else "off"


def _same(_name: str, value: Any) -> Any:
    return value


def switch(name: str, default: bool, *, on: str = "", off: str = "", **rest: Any) -> Knob:
    """An on/off knob; ``on``/``off`` are its label fragments when it is so."""
    return Knob(
        name,
        default,
        "on|off",
        parse=_parse_switch,
        check=_same,
        fragment=lambda value: on if value else off,
        shown=_on_off,
        spec=_on_off,
        **rest,
    )


def choice(
    name: str,
    choices: Sequence[str],
    *,
    short: Mapping[str, str] | None = None,
    **rest: Any,
) -> Knob:
    """A knob of named values; ``short`` names them in labels (and is accepted by --config).
    The first choice is the default and says nothing in a label."""
    short = dict(short or {})
    from_short = {v: k for k, v in short.items()}

    def parse(_name: str, text: str) -> str:
        lowered = text.strip().lower()
        return from_short.get(lowered, lowered)

    def check(knob: str, value: Any) -> Any:
        if value not in choices:
            raise ConfigError(f"{knob} must be one of {', '.join(choices)}, not {value!r}")
        return value

    return Knob(
        name,
        choices[0],
        "|".join(choices),
        parse=parse,
        check=check,
        fragment=lambda value: "" if value == choices[0] else short.get(value, value),
        choices=tuple(choices),
        **rest,
    )


_DEVICE = re.compile(r"^(cpu|gpu)(?::(\d+))?$")


def _check_device(name: str, value: Any) -> str:
    match = _DEVICE.match(str(value).lower())
    if not match:
        raise ConfigError(f"{name} must be 'cpu' or 'gpu:N', not {value!r}")
    kind, index = match.groups()
    return "cpu" if kind == "cpu" else f"gpu:{index or 0}"


def _at_least(lowest: int, highest: int | None, meaning: str = "") -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if highest is not None and not lowest <= value <= highest:
            raise ConfigError(f"{name} must be between {lowest} and {highest:,}, not {value:,}")
        if value < lowest:
            raise ConfigError(f"{name} must be {lowest}{meaning} or more, not {value}")
        return value

    return check


_DOCS = "https://www.tensorflow.org/"

KNOBS_IN_ORDER: tuple[Knob, ...] = (
    choice(
        "runtime",
        RUNTIME_NAMES,
        title="the runtime",
        tooltip="What runs the Keras model: TensorFlow, or Keras 3's JAX or PyTorch backend "
        "(the same file, other kernels). Own process.",
        link=RUNTIMES["jax"].link,
        process_level=True,
        advise_keeping=True,
        shown=lambda value: RUNTIMES[value].title,
        describe=lambda value: f"runtime {RUNTIMES[value].title}",
        aliases=("backend",),
        keyed_at_default=False,
        variants=(
            Variant("JAX", "jax", "Keras 3 on JAX (needs segdiff's jax extra)."),
            Variant("PyTorch", "torch", "Keras 3 on PyTorch (needs segdiff's torch extra)."),
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
        check=_check_device,
        fragment=str,
        link=_DOCS + "guide/gpu",
        advise_keeping=True,
        describe=str,
    ),
    Knob(
        "batch",
        1,
        "N",
        title="the batch (size, context or position)",
        tooltip="The batch size the target is inferred in: batched kernels sum in other orders.",
        parse=_parse_count,
        check=_at_least(1, MAX_BATCH),
        fragment=lambda value: f"b{value}",
        link=_DOCS + "api_docs/python/tf/keras/Model#predict",
        advise_keeping=True,
        aliases=("bs",),
        describe=lambda value: f"batch {value}",
    ),
    choice(
        "context",
        ("set", "copies"),
        title="the batch context",
        tooltip="What fills a batch beside the target: the other images of the set, or copies "
        "of the target.",
        part_of="batch",
    ),
    Knob(
        "position",
        0,
        "K",
        title="the target's position in the batch",
        tooltip="The index of the target inside its batch.",
        parse=_parse_count,
        check=_at_least(0, None),
        fragment=lambda value: f"pos{value}" if value else "",
        part_of="batch",
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
        # could reuse an algorithm chosen under tf32=on (issue 14, defect 5).
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
    switch(
        "onednn",
        True,
        off="onednn-off",
        title="oneDNN",
        tooltip="oneDNN's CPU kernels (TF_ENABLE_ONEDNN_OPTS); they reorder the arithmetic. "
        "Own process.",
        link=_DOCS + "install/pip#hardware_requirements",
        process_level=True,
        advise_keeping=True,
        variants=(Variant("oneDNN off", False, "Off: CPU kernels without oneDNN."),),
    ),
    Knob(
        "threads",
        0,
        "N",
        title="the intra-op thread count",
        tooltip="Intra-op threads (0: TensorFlow's default); fewer threads sum in fewer pieces. "
        "Own process.",
        parse=_parse_count,
        check=_at_least(0, None, " (TensorFlow's default)"),
        fragment=lambda value: f"threads{value}" if value else "",
        shown=lambda value: str(value) if value else "default",
        link=_DOCS + "api_docs/python/tf/config/threading/set_intra_op_parallelism_threads",
        process_level=True,
        advise_keeping=True,
        variants=(Variant("1 thread", 1, "One thread: the CPU sums in one order."),),
        describe=lambda value: f"{value or 'default'} intra-op threads",
    ),
    switch(
        "xla",
        False,
        on="xla",
        title="XLA",
        tooltip="Compile the forward pass with XLA (jit_compile=True): fused kernels round "
        "differently.",
        link=_DOCS + "xla",
        advise_keeping=True,
        variants=(Variant("XLA", True, ""),),
    ),
    choice(
        "precision",
        ("float32", "mixed_bfloat16", "mixed_float16"),
        short={"float32": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"},
        title="the precision policy",
        tooltip="The Keras dtype policy the model is rebuilt with.",
        link=_DOCS + "guide/mixed_precision",
        advise_keeping=True,
        describe=str,
        variants=(
            Variant("bfloat16", "mixed_bfloat16", "Layers compute in bfloat16 (8-bit mantissa)."),
            Variant("float16", "mixed_float16", "Layers compute in float16 (10-bit mantissa)."),
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

    def process_settings(self, config: Any) -> tuple[object, ...]:
        """The knobs TensorFlow reads once per process: equal values may share a child."""
        return tuple(getattr(config, k.name) for k in self.knobs if k.process_level)

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
