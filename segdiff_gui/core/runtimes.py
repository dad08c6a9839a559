"""The runtimes a model can run under, written once: Keras 3 on TensorFlow (the default), JAX
or PyTorch. Each names the package that must be installed, the extra that installs it, the
engine module that drives it, where it documents itself, and the knob values that mean nothing
under it (refused with one line, never silently ignored).

Qt-free and import-free: whether a runtime is installed is asked with ``find_spec``, which
imports nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["RUNTIMES", "RUNTIME_NAMES", "Runtime", "installed_runtimes", "refusal"]


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

    def installed(self) -> bool:
        return importlib.util.find_spec(self.package) is not None


def _refuses_nothing(_config: Any) -> str:
    return ""


def _jax_refuses(config: Any) -> str:
    if not config.onednn:
        return (
            "onednn=off means nothing under JAX: oneDNN is TensorFlow's CPU kernel switch and "
            "XLA's CPU backend has none (keep onednn=on)"
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
)
RUNTIMES = {runtime.name: runtime for runtime in RUNTIMES_IN_ORDER}
RUNTIME_NAMES = tuple(RUNTIMES)


def refusal(config: Any) -> str:
    """Why ``config`` cannot run under its runtime ("" when it can)."""
    return RUNTIMES[config.runtime].refuses(config)


def installed_runtimes() -> tuple[Runtime, ...]:
    return tuple(runtime for runtime in RUNTIMES_IN_ORDER if runtime.installed())
