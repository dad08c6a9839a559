"""How a knob is declared: :class:`Knob` (everything the front ends and the analysis need to
know about one setting), the matrix editor's :class:`Variant`, and the builders and value
parsers the registry in :mod:`segdiff_gui.core.knobs` is written with."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segdiff_gui.core.errors import ConfigError

__all__ = [
    "Knob",
    "Variant",
    "at_least",
    "check_device",
    "check_layer_names",
    "choice",
    "parse_count",
    "parse_layer_names",
    "switch",
    "unforced_choice",
    "unforced_switch",
]

_TRUE = {"on", "true", "1", "yes"}
_FALSE = {"off", "false", "0", "no"}


@dataclass(frozen=True)
class Variant:
    """A one-knob-at-a-time run the matrix editor offers: a batch-1 run with this value."""

    label: str  # the checkbox: "XLA", "TF32 off"
    value: object
    tooltip: str  # what this value does, beyond the knob's own tooltip
    gpu_only: bool = False  # no effect on a CPU: not added for one (it would equal the plain run)
    cpu_only: bool = False  # a CPU's emulation of a GPU: not added for a GPU (it would be refused)


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
    # Whether the forward pass a child builds for a run depends on it (``forward_key``).
    # A knob that only says what fills the batch (its size, context, the target's position)
    # is False: the same function computes every batch. A knob set at run time is in the key
    # unless it says so here, so a new one can never reuse another value's compiled function.
    builds_forward: bool = True
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
        """The knob at ``value`` as a sentence names it: "XLA off", "batch 1", "device cpu",
        "oneDNN at TensorFlow's default"."""
        return self.describe(value) if self.describe else f"{self.title} {self.shown(value)}"


def _parse_switch(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name} must be on or off, not {text!r}")


def parse_count(name: str, text: str) -> int:
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


def _parse_unforced(name: str, text: str) -> bool | None:
    if text.strip().lower() == "default":
        return None
    try:
        return _parse_switch(name, text)
    except ConfigError:
        raise ConfigError(f"{name} must be default, on or off, not {text!r}") from None


def _check_unforced(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"{name} must be default, on or off, not {value!r}")


def unforced_switch(name: str, *, on: str, off: str, runtime_default: str, **rest: Any) -> Knob:
    """An on/off knob whose default is not a value but the runtime's own choice (``None``),
    left unset in the child and read back there: ``on``/``off`` are its label fragments when
    set; ``runtime_default`` says in words whose choice the default is ("TensorFlow's
    default"). It is left out of the keyed form at its default (its value in effect is keyed
    instead: core/runtime_defaults.py), so a run stored with it set keeps its key."""

    def shown(value: object) -> str:
        return runtime_default if value is None else _on_off(value)

    def describe(value: object) -> str:  # "oneDNN at TensorFlow's default", "XLA off"
        return f"{rest['title']} {'at ' if value is None else ''}{shown(value)}"

    return Knob(
        name,
        None,
        "default|on|off",
        parse=_parse_unforced,
        check=_check_unforced,
        fragment=lambda value: "" if value is None else on if value else off,
        shown=shown,
        describe=describe,
        spec=lambda value: "default" if value is None else _on_off(value),
        keyed_at_default=False,
        **rest,
    )


def unforced_choice(
    name: str, choices: Sequence[str], *, runtime_default: str, **rest: Any
) -> Knob:
    """A knob of named values whose default is not one of them but the runtime's own choice
    (``None``), left unset in the child and read back there, as :func:`unforced_switch` is
    for on/off: ``choices`` are the values it can be set to; ``runtime_default`` says in
    words whose choice the default is. A set value's label fragment is its ``fragment``."""
    values = tuple(choices)
    written = "|".join(("default", *values))

    def parse(_name: str, text: str) -> str | None:
        lowered = text.strip().lower()
        return None if lowered == "default" else lowered

    def check(knob: str, value: Any) -> str | None:
        if value is None or value in values:
            return value  # type: ignore[no-any-return]
        raise ConfigError(f"{knob} must be one of {written.replace('|', ', ')}, not {value!r}")

    def shown(value: object) -> str:
        return runtime_default if value is None else str(value)

    return Knob(
        name,
        None,
        written,
        parse=parse,
        check=check,
        shown=shown,
        spec=lambda value: "default" if value is None else str(value),
        describe=lambda value: f"{rest['title']} {'at ' if value is None else ''}{shown(value)}",
        keyed_at_default=False,
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


def check_device(name: str, value: Any) -> str:
    match = _DEVICE.match(str(value).lower())
    if not match:
        raise ConfigError(f"{name} must be 'cpu' or 'gpu:N', not {value!r}")
    kind, index = match.groups()
    return "cpu" if kind == "cpu" else f"gpu:{index or 0}"


def at_least(lowest: int, highest: int | None, meaning: str = "") -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if highest is not None and not lowest <= value <= highest:
            raise ConfigError(f"{name} must be between {lowest} and {highest:,}, not {value:,}")
        if value < lowest:
            raise ConfigError(f"{name} must be {lowest}{meaning} or more, not {value}")
        return value

    return check


MAX_LAYER_NAMES = 4096
# Keras takes any name: far longer than any real one, and all of them together well within a
# stored configuration's text bound (storage's MAX_TEXT_BYTES).
_LAYER_NAME_BYTES = 1024
_LAYER_NAMES_BYTES = 512 << 10
# What a spec's own syntax uses, written %XX inside a layer name (``%`` itself first).
_SPEC_CHARACTERS = {"%": "%25", "+": "%2B", ",": "%2C", "=": "%3D"}


def layer_names_spec(layers: Sequence[str]) -> str:
    """``a+b%2Bc`` for the layers ``a`` and ``b+c``: names joined by ``+``, with ``%``, ``+``,
    ``,`` and ``=`` inside a name written as ``%25``, ``%2B``, ``%2C``, ``%3D`` (every name
    Keras accepts can be written; :func:`parse_layer_names` reads it back)."""
    encoded = []
    for layer in layers:
        for character, code in _SPEC_CHARACTERS.items():
            layer = layer.replace(character, code)
        encoded.append(layer)
    return "+".join(encoded)


def parse_layer_names(_name: str, text: str) -> tuple[str, ...]:
    """``enc1_1+decoder/conv`` → the layer names (hierarchical, as the layer probe names
    them), each with its ``%XX`` codes read (:func:`layer_names_spec`); ``none`` or nothing
    → none."""
    stripped = text.strip()
    if stripped.lower() in ("", "none"):
        return ()
    return tuple(_decoded(part.strip()) for part in stripped.split("+"))


def _decoded(part: str) -> str:
    codes = {code: character for character, code in _SPEC_CHARACTERS.items()}
    return re.sub("%(25|2[Bb]|2[Cc]|3[Dd])", lambda m: codes[m.group(0).upper()], part)


def check_layer_names(name: str, value: Any) -> tuple[str, ...]:
    """Layer names as a sorted tuple of distinct, bounded names (a stored list included)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{name} must be layer names joined by '+', not {value!r}")
    if len(value) > MAX_LAYER_NAMES:
        raise ConfigError(f"{name} names {len(value):,} layers, over {MAX_LAYER_NAMES:,}")
    for layer in value:
        if not layer or len(layer.encode()) > _LAYER_NAME_BYTES:
            raise ConfigError(f"{name}: {layer[:40]!r} is not a layer name")
    if sum(len(layer.encode()) for layer in value) > _LAYER_NAMES_BYTES:
        raise ConfigError(f"{name}: the names take over {_LAYER_NAMES_BYTES >> 10} KiB")
    return tuple(sorted(set(value)))
