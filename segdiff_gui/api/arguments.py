"""The API's arguments checked and turned into the run request's parts: configurations
(specs, dicts, RunConfigs), preprocessing, file paths, counts, cutoffs. A wrong argument is an
:class:`InputError` that names it, raised before anything runs: a typo must not cost a matrix."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.core.artefacts import base_config
from segdiff_gui.core.config import (
    ModelSettings,
    OutputSelection,
    Preprocessing,
    RunConfig,
    parse_config_spec,
)
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.floatfmt import as_float32
from segdiff_gui.core.model_settings import PREPROCESS_KEYS, STEPS, ModelSetting, preprocessing_of
from segdiff_gui.io.images import collect_images
from segdiff_gui.runner.arguments import preprocessing_function
from segdiff_gui.storage.cache import ResultCache

__all__ = [
    "ConfigLike",
    "PathLike",
    "cache_of",
    "checked_cutoff",
    "checked_path",
    "configurations",
    "configuration",
    "flag",
    "image_paths",
    "model_settings",
    "output_path",
    "per_output",
    "positive",
    "preprocessing",
    "whole_number",
]

# A configuration: a ``key=value`` spec ("device=cpu,batch=64"), a mapping of knobs
# ({"device": "cpu", "batch": 64}) or a RunConfig.
ConfigLike = str | Mapping[str, Any] | RunConfig
PathLike = str | Path


def checked_cutoff(value: object, name: str = "cutoff") -> float:
    """A class cutoff, between 0 and 1 (``p >= cutoff`` is the foreground), as the flips are
    counted at it: the float32 it rounds to (``0.5500041246414185`` is ``0.5500041``)."""
    try:
        cutoff = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(name, f"is {value!r}: give a number between 0 and 1") from None
    if not 0.0 <= cutoff <= 1.0:
        raise InputError(name, f"is {value!r}: give a cutoff between 0 and 1")
    return as_float32(cutoff)


def per_output(value: object, name: str, quantile: bool = False) -> dict[str, float]:
    """A tolerance (or, ``quantile``, a quantile) as Polygraphy's API takes one: a number for
    every output, or a mapping of an output's name to its number (``""``: every output not
    named); as ``(output, number)`` pairs keyed by name. ``None`` gives none."""
    if value is None:
        return {}
    given = value if isinstance(value, Mapping) else {"": value}
    wanted = "a number from 0 to 1" if quantile else "a finite number ≥ 0"
    found = {}
    for output, number in given.items():
        try:
            checked = float(number)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            checked = math.nan
        fits = 0 <= checked <= 1 if quantile else math.isfinite(checked) and checked >= 0
        if isinstance(number, bool) or not isinstance(output, str) or not fits:
            where = f"{name}[{output!r}]" if isinstance(value, Mapping) else name
            raise InputError(where, f"is {number!r}: give {wanted}")
        found[output] = checked
    return found


def flag(value: object, name: str) -> bool:
    """A real bool: ``trust_model="false"`` must not turn Keras safe mode off."""
    if not isinstance(value, bool | np.bool_):
        raise InputError(name, f"is {value!r}: give True or False")
    return bool(value)


def whole_number(value: object, name: str, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise InputError(name, f"is {value!r}: give a whole number of at least {least}")
    return int(value)


def positive(value: object, name: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not number > 0 or math.isinf(number):
        raise InputError(name, f"is {value!r}: give a positive number of seconds")
    return number


def checked_path(value: object, what: str) -> Path:
    """A file or folder path; an array or a model object is said to be none."""
    if isinstance(value, str | Path):
        return Path(value)
    if isinstance(value, np.ndarray):
        raise InputError(
            what,
            "is an array: segdiff reads files (the cache keys their bytes); save it with "
            "numpy.save('image.npy', array) and give the file",
        )
    raise InputError(what, f"is a {type(value).__name__}: give a file or folder path")


def image_paths(images: object) -> list[Path]:
    """Image files and folders of them, as ``segdiff run`` takes them."""
    if isinstance(images, str | Path | np.ndarray):
        entries = [checked_path(images, "images")]
    elif isinstance(images, Sequence):
        entries = [checked_path(entry, "images") for entry in images]
    else:
        entries = [checked_path(images, "images")]
    found = collect_images(list(entries))
    if not found:
        raise InputError("images", "name at least one image or folder of images")
    return found


def output_path(value: object, what: str) -> Path:
    """A file to write, in a folder that exists."""
    path = checked_path(value, what)
    if path.is_dir():
        raise InputError(path, "is a folder; give the file to write")
    if not path.parent.is_dir():
        raise InputError(path.parent, f"no such folder for the {what}")
    return path


def _spec_value(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return "+".join(map(str, value))
    return str(value)


def _parsed(spec: str, shown: str, base: RunConfig) -> RunConfig:
    try:
        return parse_config_spec(spec, base)
    except ConfigError as error:
        raise InputError(shown, str(error)) from None


def configuration(value: object, model: PathLike | None = None) -> RunConfig:
    """One configuration from a spec, a mapping of knobs or a RunConfig; a spec or a mapping
    of ``model``'s starts from its runtime, as ``--config`` does (an artefact's own:
    ``"xnnpack=off"`` alone)."""
    if isinstance(value, RunConfig):
        return value
    base = base_config(model) if model is not None else RunConfig()
    if isinstance(value, Mapping):
        spec = ",".join(f"{key}={_spec_value(item)}" for key, item in value.items())
        return _parsed(spec, repr(dict(value)), base)
    if isinstance(value, str):
        return _parsed(value, value, base)
    raise InputError(
        repr(value), "is not a configuration: give a key=value spec, a dict or a RunConfig"
    )


def configurations(configs: object, model: PathLike | None = None) -> tuple[RunConfig, ...]:
    """``None``: none given (the default matrix); one configuration or a sequence of them,
    each of ``model`` (:func:`configuration`)."""
    if configs is None:
        return ()
    if isinstance(configs, str | Mapping | RunConfig):
        return (configuration(configs, model),)
    if not isinstance(configs, Sequence):
        return (configuration(configs, model),)  # says what it is not
    if not configs:
        raise InputError(
            "configs",
            "is empty: give at least one configuration, or leave it out for batch 1 and 64 "
            "on every device",
        )
    return tuple(configuration(value, model) for value in configs)


def _scale_text(name: str, value: object) -> str | None:
    """A scale or divisor as the CLI's text: a number exactly (1/255 stays 1/255's float), or
    text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise InputError("preprocess", f"{name} is {value!r}: give a number or text like '1/255'")
    return str(Fraction(float(value)))


def _channels_text(name: str, value: object) -> str | None:
    """A mean or std as the CLI's text: one value, or one per channel."""
    if value is None or isinstance(value, str):
        return value
    values = value if isinstance(value, list | tuple | np.ndarray) else [value]
    try:
        return ",".join(repr(float(v)) for v in values)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError("preprocess", f"{name} is {value!r}: give numbers") from None


def preprocessing(value: Preprocessing | Mapping[str, Any] | str | None) -> Preprocessing:
    """How an image becomes the model's input, from a mapping of the CLI's settings."""
    if value is None:
        return Preprocessing()
    if isinstance(value, Preprocessing):
        return value
    if isinstance(value, str):  # your own function: "prepare.py:prepare"
        return preprocessing_function(value)
    if not isinstance(value, Mapping):
        raise InputError("preprocess", f"is a {type(value).__name__}: give a dict")
    unknown = sorted(set(value) - set(PREPROCESS_KEYS))
    if unknown:
        raise InputError(
            "preprocess", f"has no setting {unknown[0]!r} (settings: {', '.join(PREPROCESS_KEYS)})"
        )
    try:
        texts = {step.name: _step_text(step, value.get(step.name, step.default)) for step in STEPS}
        return preprocessing_of(texts)
    except (ConfigError, ValueError) as error:
        raise InputError("preprocess", str(error)) from None


def _step_text(step: ModelSetting, value: object) -> str | None:
    """A preprocessing step's value as the CLI's text (a choice's as it is written)."""
    if step.value == "number":
        return _scale_text(step.name, value)
    if step.value == "numbers":
        return _channels_text(step.name, value)
    return str(value)


def cache_of(cache: PathLike | ResultCache | None) -> ResultCache:
    """A cache: the one given, the folder given, or the default (``$SEGDIFF_CACHE``, else the
    platform's user cache folder), as the CLI's ``--cache``."""
    if isinstance(cache, ResultCache):
        return cache
    return ResultCache(checked_path(cache, "cache")) if cache is not None else ResultCache()


def model_settings(
    preprocess: Preprocessing | Mapping[str, Any] | str | None,
    output: str | int | None,
    activation: str,
    trust_model: bool,
    trust_preprocess: bool = False,
) -> ModelSettings:
    """The model's settings ``run``, ``reproduce`` and ``import_maps`` take, checked."""
    try:
        selection = OutputSelection(
            output=None if output is None else str(output),
            activation=activation,  # type: ignore[arg-type]  # checked here
        )
    except ConfigError as error:
        raise InputError("activation", str(error)) from None
    return ModelSettings(
        preprocessing(preprocess),
        selection,
        flag(trust_model, "trust_model"),
        flag(trust_preprocess, "trust_preprocess"),
    )
