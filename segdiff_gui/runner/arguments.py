"""Command-line options both front ends share (``segdiff run`` and ``segdiff-gui``): a model's
settings, the configurations, repeats, timeout and target are written once, with the same
names and help in both."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from segdiff_gui.core.artefacts import base_config
from segdiff_gui.core.config import (
    ConfigError,
    ModelSettings,
    Preprocessing,
    RunConfig,
    parse_config_spec,
)
from segdiff_gui.core.defaults import (
    DEFAULT_LAYER_DISK_BUDGET,
    DEFAULT_LAYER_MEMORY_BUDGET,
    DEFAULT_REPEATS,
    DEFAULT_TIMEOUT_S,
)
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.model_settings import (
    MODEL_SETTINGS,
    SETTINGS,
    STEPS,
    preprocessing_of,
    settings_of,
)
from segdiff_gui.core.text import format_size, parse_size
from segdiff_gui.core.user_code_files import code_digest

__all__ = [
    "add_configs",
    "add_layer_budgets",
    "add_model_settings",
    "add_repeats_and_timeout",
    "add_source",
    "add_timeout",
    "configs_of",
    "model_settings",
    "number",
    "preprocessing_function",
]


def number(kind: type, test: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    """An argparse type: ``kind`` of the text, refused unless ``test`` holds."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value  # type: ignore[no-any-return]

    return parse


_positive_seconds = number(float, lambda v: v > 0, "a positive number of seconds")
_count = number(int, lambda v: v >= 1, "a whole number of at least 1")


def add_configs(parser: argparse.ArgumentParser) -> None:
    """``--target`` and the repeatable ``--config``, as ``segdiff run`` takes them."""
    parser.add_argument("--target", metavar="NAME", help="the image to study (default: the first)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"comma-separated key=value: {KNOBS.help()}; repeatable, one per configuration",
    )


def add_source(parser: argparse.ArgumentParser, configs: bool = True) -> None:
    """``--source``, the Keras model an artefact was converted from, and (``configs``) its
    repeatable ``--source-config``."""
    parser.add_argument(
        "--source",
        metavar="MODEL",
        help="the Keras model (.keras or legacy .h5) that your artefact (.tflite, .onnx, "
        "OpenVINO IR) was converted from: its runs beside the artefact's, on the same images, "
        "preprocessing and output, in one study (the exact float64 run made from it); the "
        "artefact's runs are named with its file name",
    )
    if configs:
        parser.add_argument(
            "--source-config",
            action="append",
            default=[],
            metavar="SPEC",
            help="a configuration of the --source, as --config (default: each of the "
            "artefact's devices and batches at the source's defaults, and precision=float64); "
            "repeatable",
        )


def configs_of(specs: list[str], model: str | Path | None) -> tuple[RunConfig, ...]:
    """``--config`` specs as configurations of ``model``: an artefact's start from its own
    runtime (``xnnpack=off`` alone), any other model's from every default."""
    base = base_config(model) if model else RunConfig()
    return tuple(parse_config_spec(spec, base) for spec in specs)


def add_repeats_and_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeats",
        type=_count,
        default=DEFAULT_REPEATS,
        metavar="N",
        help=f"runs of each configuration (default {DEFAULT_REPEATS}; on a GPU, repeats show "
        "nondeterminism)",
    )
    add_timeout(parser)


def add_timeout(parser: argparse.ArgumentParser) -> None:
    """How long a child may stay silent (commands that run each configuration once)."""
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help="kill a child that reports nothing for S seconds; its run fails (default "
        f"{DEFAULT_TIMEOUT_S:g})",
    )


def add_model_settings(parser: argparse.ArgumentParser) -> None:
    """How images become the model's input, which output is the map, and trust: an option
    for each model setting (core/model_settings.py)."""
    group = parser.add_argument_group("model settings (part of the cache key)")
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for setting in MODEL_SETTINGS:
        where: argparse._ActionsContainer = group
        if setting.exclusive:
            if setting.exclusive not in exclusive:
                exclusive[setting.exclusive] = group.add_mutually_exclusive_group()
            where = exclusive[setting.exclusive]
        if setting.switch:
            where.add_argument(setting.flag, action="store_true", help=setting.help)
        else:
            where.add_argument(
                setting.flag,
                metavar=setting.metavar,
                choices=setting.choices or None,
                default=setting.default,
                help=setting.help,
            )


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The settings the options of :func:`add_model_settings` name (a ConfigError if not)."""
    preprocessing = preprocessing_of({step.name: getattr(args, step.name) for step in STEPS})
    if args.preprocess:
        if preprocessing != Preprocessing():
            flags = [step.flag for step in STEPS]
            raise ConfigError(
                f"{SETTINGS['preprocess'].flag} replaces {', '.join(flags[:-1])} and {flags[-1]}"
            )
        preprocessing = preprocessing_function(args.preprocess)
    return settings_of(preprocessing, vars(args))


def preprocessing_function(spec: str) -> Preprocessing:
    """``prepare.py:prepare`` as a preprocessing: the file's bytes, and those of the modules
    of its folder it imports, hashed now (its key, ``core/user_code_files.py``), checked
    again in the child before the function runs there."""
    file, sep, name = spec.rpartition(":")
    path = Path(file)
    if not sep or path.suffix != ".py" or not name.isidentifier():
        raise InputError(spec, "is not FILE.py:FUNCTION (a Python file and a function's name)")
    if not path.is_file():
        raise InputError(path, "no such Python file")
    return Preprocessing(
        function=f"{path.name}:{name}",
        function_sha256=code_digest(path),
        function_file=str(path.resolve()),
    )


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_layer_budgets(parser: argparse.ArgumentParser) -> None:
    """What a layer probe may hold in memory and keep on disk."""
    parser.add_argument(
        "--memory",
        metavar="SIZE",
        type=_size,
        default=DEFAULT_LAYER_MEMORY_BUDGET,
        help="layer tensors a comparison holds at once: each layer is stored and compared in "
        f"pieces of rows that fit (default {format_size(DEFAULT_LAYER_MEMORY_BUDGET)})",
    )
    parser.add_argument(
        "--keep",
        metavar="SIZE",
        type=_size,
        default=DEFAULT_LAYER_DISK_BUDGET,
        help="probes' layer tensors the cache keeps, least recently used removed first; the "
        "figures and difference maps are always kept "
        f"(default {format_size(DEFAULT_LAYER_DISK_BUDGET)}; 0 keeps none)",
    )
