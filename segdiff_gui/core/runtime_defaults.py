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
decides over that. Every other knob's default means the same on every machine (threads: the
runtime's own count; TF32: TensorFlow's default on; determinism and XLA: off).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = [
    "DefaultsInEffect",
    "in_effect_lines",
    "onednn_in_effect",
    "ONEDNN_CPU_FLAGS",
    "cpu_flags",
    "defaults_in_effect",
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

    def to_dict(self) -> dict[str, Any]:
        """The keyed and stored form: only what was predicted (``{}`` keeps old keys)."""
        return {} if self.onednn is None else {"onednn": self.onednn}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DefaultsInEffect:
        onednn = data.get("onednn")
        return cls(onednn=onednn if isinstance(onednn, bool) else None)

    def mismatch(self, facts: Mapping[str, Any]) -> str:
        """What is wrong when the child's read-back ``facts`` disagree with the prediction
        (the run would be stored under another computation's key); "" when they agree."""
        if self.onednn is None or facts.get("onednn_enabled") == self.onednn:
            return ""
        got, planned = ("on", "off") if facts.get("onednn_enabled") else ("off", "on")
        return (
            f"oneDNN is {got} by default in this TensorFlow, but segdiff expected {planned} "
            "on this machine; set it explicitly (onednn=on or onednn=off)"
        )

    def sentence(self) -> str:
        """``oneDNN off: TensorFlow's default on this CPU``; "" when nothing was predicted."""
        if self.onednn is None:
            return ""
        return f"oneDNN {'on' if self.onednn else 'off'}: TensorFlow's default on this CPU"


@cache
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags as Linux names them ("" elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
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


def defaults_in_effect(config: Any, environ: Mapping[str, str]) -> DefaultsInEffect:
    """What ``config``'s unset knobs will be in its child, where that depends on the machine."""
    if config.runtime == "tensorflow" and config.onednn is None:
        return DefaultsInEffect(onednn=tensorflow_onednn_default(environ))
    return DefaultsInEffect()


_DEFAULT_OF = {"tensorflow": "TensorFlow's default on this CPU", "torch": "PyTorch's default"}


def onednn_in_effect(config: Any, provenance: Mapping[str, Any]) -> str:
    """What a stored run had: ``off: TensorFlow's default on this CPU``, ``on: set
    (onednn=on)``; "" where the runtime has no oneDNN switch or nothing was recorded."""
    runtime = str(provenance.get("runtime", "tensorflow"))
    enabled = provenance.get("onednn_enabled")
    if runtime not in _DEFAULT_OF or not isinstance(enabled, bool):
        return ""
    state = "on" if enabled else "off"
    if config.onednn is None:
        return f"{state}: {_DEFAULT_OF[runtime]}"
    return f"{state}: set (onednn={'on' if config.onednn else 'off'})"


def in_effect_lines(config: Any, provenance: Mapping[str, Any]) -> list[str]:
    """What a stored run computed with, as its child read it back (an imported map: what was
    stated of it), a line each: for the window's inspector and the like."""
    stated = provenance.get("imported")
    if isinstance(stated, Mapping):
        notes = stated.get("notes")
        said = ", ".join(f"{k}={v}" for k, v in notes.items()) if isinstance(notes, Mapping) else ""
        return [
            f"imported from {stated.get('file', '?')} (stated, not measured)",
            *([f"notes: {said}"] if said else []),
        ]
    runtime = str(provenance.get("runtime", "tensorflow"))
    version = provenance.get("runtime_version") or provenance.get("tf_version") or ""
    lines = [f"on {provenance.get('device', '?')}, {runtime} {version}".rstrip()]
    if onednn := onednn_in_effect(config, provenance):
        lines.append(f"oneDNN {onednn}")
    threads = provenance.get("intra_op_threads")
    if isinstance(threads, int):
        lines.append(f"intra-op threads: {threads or 'the runtime default'}")
    for name, title in (("xla", "XLA"), ("op_determinism", "op determinism"),
                        ("tf32_enabled", "TF32")):  # fmt: skip
        if isinstance(provenance.get(name), bool):
            lines.append(f"{title} {'on' if provenance[name] else 'off'}")
    if host := provenance.get("hostname"):
        lines.append(f"host {host}")
    return lines
