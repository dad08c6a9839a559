"""Command-line options both front ends share (``segdiff run`` and ``segdiff-gui``): a model's
settings, the configurations, repeats, timeout and target are written once, with the same
names and help in both."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from segdiff_gui.core.artefacts import base_config
from segdiff_gui.core.config import (
    ACTIVATIONS,
    ConfigError,
    ModelSettings,
    OutputSelection,
    Preprocessing,
    RunConfig,
    parse_config_spec,
    parse_preprocessing,
)
from segdiff_gui.core.defaults import (
    DEFAULT_LAYER_DISK_BUDGET,
    DEFAULT_LAYER_MEMORY_BUDGET,
    DEFAULT_REPEATS,
    DEFAULT_TIMEOUT_S,
)
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.floatfmt import fraction_text
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.text import format_size, parse_size
from segdiff_gui.core.user_code_files import code_digest

__all__ = [
    "TRUST_PREPROCESS_WARNING",
    "TRUST_WARNING",
    "add_configs",
    "add_layer_budgets",
    "add_model_settings",
    "add_repeats_and_timeout",
    "add_source",
    "add_timeout",
    "configs_of",
    "model_settings",
    "number",
    "option_values",
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


# What trusting a preprocessing function means (--trust-preprocess, the window's checkbox).
TRUST_PREPROCESS_WARNING = (
    "allow your preprocessing function (--preprocess) to run in segdiff's child: it is Python "
    "code with your permissions and can read, write or send any of your files; trust only code "
    "you wrote or whose source you trust"
)
# What trusting a model means, for the --trust-model help and the window's checkbox.
TRUST_WARNING = (
    "allow code in the model (Lambda layers, SavedModel graphs) to run: Keras safe mode off. "
    "Such code can read, write or send any of your files; trust only models whose source you "
    "trust"
)


def add_model_settings(parser: argparse.ArgumentParser) -> None:
    """How images become the model's input, which output is the map, and trust."""
    group = parser.add_argument_group("model settings (part of the cache key)")
    scaling = group.add_mutually_exclusive_group()
    scaling.add_argument(
        "--divide",
        metavar="D",
        help="divide the pixels by D in float32, as img.astype(np.float32) / 255.0 does (the "
        "default: by the image's dtype, 255 for 8-bit and 65535 for 16-bit images)",
    )
    scaling.add_argument(
        "--scale",
        metavar="X",
        help="multiply the pixels by float32(X) instead, e.g. 1/255, as Keras's Rescaling "
        "layer does (it rounds differently from dividing)",
    )
    group.add_argument(
        "--mean", metavar="M[,M,M]", help="per-channel mean subtracted after scaling"
    )
    group.add_argument("--std", metavar="S[,S,S]", help="per-channel std divided after the mean")
    group.add_argument(
        "--color",
        choices=("keep", "gray", "rgb"),
        default="keep",
        help="convert channels only when asked (default keep)",
    )
    group.add_argument(
        "--resize",
        choices=("refuse", "bilinear"),
        default="refuse",
        help="what to do when the image size differs from the model's (default refuse)",
    )
    group.add_argument(
        "--output", metavar="NAME|INDEX", help="which output of a multi-output model"
    )
    group.add_argument(
        "--activation",
        choices=ACTIVATIONS,
        default="none",
        help="apply to raw logits (default none: outputs must already be probabilities)",
    )
    group.add_argument("--trust-model", action="store_true", help=TRUST_WARNING)
    group.add_argument(
        "--preprocess",
        metavar="FILE.py:FUNCTION",
        help="your own preprocessing: FUNCTION(image array) gives the model's input, in place "
        "of divide/scale/mean/std/colour/resize (the file's bytes are part of the key; it runs "
        "only with --trust-preprocess)",
    )
    group.add_argument("--trust-preprocess", action="store_true", help=TRUST_PREPROCESS_WARNING)


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The settings the options of :func:`add_model_settings` name (a ConfigError if not)."""
    preprocessing = parse_preprocessing(
        args.scale, args.mean, args.std, args.color, args.resize, args.divide
    )
    if args.preprocess:
        if preprocessing != Preprocessing():
            raise ConfigError(
                "--preprocess replaces --divide, --scale, --mean, --std, --color and --resize"
            )
        preprocessing = preprocessing_function(args.preprocess)
    return ModelSettings(
        preprocessing=preprocessing,
        output=OutputSelection(output=args.output, activation=args.activation),
        trust_model=args.trust_model,
        trust_preprocess=args.trust_preprocess,
    )


def option_values(settings: ModelSettings) -> dict[str, str | bool]:
    """The options of :func:`add_model_settings` that give ``settings`` back through
    :func:`model_settings`, by their destination (``{"color": "rgb", "scale": "1/255",
    "trust_model": True}``), those at their defaults left out: what a suggested command or
    call must say to make the same runs (the CLI names each by its flag, the API by its
    argument). A scale or divisor is written exactly (``1/255`` where that fraction is the
    float), a mean or std as the shortest text of each float."""
    values: dict[str, str | bool] = {}
    prep = settings.preprocessing
    if prep.function is not None:
        file = prep.function_file  # where the child loads it from
        name = prep.function.rpartition(":")[2]
        values["preprocess"] = f"{file}:{name}" if file else prep.function
    else:
        # by_dtype="multiply" without a number is an older stored run's (before ``divide``): no
        # option makes it, and no front end asks for it.
        for dest, number in (("divide", prep.divisor), ("scale", prep.scale)):
            if number is not None:
                values[dest] = fraction_text(number)
        for dest, floats in (("mean", prep.mean), ("std", prep.std)):
            if floats:
                values[dest] = ",".join(map(repr, floats))
        for dest, text, default in (("color", prep.color, "keep"),
                                    ("resize", prep.resize, "refuse")):  # fmt: skip
            if text != default:
                values[dest] = text
    if settings.output.output is not None:
        values["output"] = settings.output.output
    if settings.output.activation != "none":
        values["activation"] = settings.output.activation
    if settings.trust_model:
        values["trust_model"] = True
    if settings.trust_preprocess:
        values["trust_preprocess"] = True
    return values


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
