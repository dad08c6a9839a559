"""Your own pipeline's maps from Python: :func:`import_maps` brings them into the cache as runs
marked imported, :func:`reproduce` (and ``Study.reproduce``) finds the configuration that
computes one bit for bit. The same workflows as ``segdiff import`` and ``segdiff reproduce``
(runner/imports.py, runner/reproduce.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from segdiff_gui.api.arguments import (
    ConfigLike,
    PathLike,
    cache_of,
    checked_path,
    configuration,
    image_paths,
    model_settings,
    positive,
)
from segdiff_gui.api.hints import with_argument
from segdiff_gui.api.progress import ProgressBar
from segdiff_gui.api.results import html_document
from segdiff_gui.api.tables import Table, make_table
from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.defaults import DEFAULT_TIMEOUT_S
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.model_settings import PREPROCESS_KEYS, option_values
from segdiff_gui.core.reproduce import Reproduction
from segdiff_gui.core.text import printable
from segdiff_gui.io.maps import MapFile, open_maps
from segdiff_gui.runner.imports import ImportRequest
from segdiff_gui.runner.imports import import_maps as import_request
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import MatrixOutcome, follow
from segdiff_gui.runner.plan import check_model_path
from segdiff_gui.runner.reproduce import ReproduceSearch
from segdiff_gui.runner.reproduce import reproduce as search_for
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache

__all__ = ["Reproduced", "import_maps", "reproduce", "reproduce_in"]


def import_maps(
    maps: PathLike,
    model: PathLike,
    images: PathLike | Sequence[PathLike],
    *,
    label: str = "",
    notes: Mapping[str, str] | None = None,
    preprocess: Preprocessing | Mapping[str, Any] | None = None,
    output: str | int | None = None,
    activation: str = "none",
    trust_model: bool = False,
    cache: PathLike | ResultCache | None = None,
) -> list[str]:
    """Bring maps made by your own pipeline into the cache, as ``segdiff import`` does.

    Parameters
    ----------
    maps : str or Path
        ``.npy``, ``.npz`` (one map per member, named after its image or in the images'
        order) or float TIFF: a map H×W (H×W×C for softmax), or a batch N×H×W[×C] of the
        images in order. float64 is rounded to float32; integers, NaN and object arrays are
        refused.
    model, images
        The model that made the maps and the images they were made of.
    label, notes
        What you call it and what you know of where it came from: shown as stated.
    preprocess, output, activation, trust_model, cache
        As :func:`segdiff_gui.run`: the model settings the maps are to be compared under.

    Returns
    -------
    list of str
        The keys of the imported runs (in the images' order); open them with
        ``open_cache(cache)``, where each is labelled ``imported: LABEL``.
    """
    settings = model_settings(preprocess, output, activation, trust_model)
    stated = notes or {}
    if not isinstance(stated, Mapping):
        raise InputError("notes", f"is a {type(stated).__name__}: give a dict of text")
    request = ImportRequest(
        maps=checked_path(maps, "maps"),
        model=check_model_path(checked_path(model, "model")),
        images=tuple(image_paths(images)),
        cache=cache_of(cache),
        settings=settings,
        label=str(label),
        notes=tuple((str(k), str(v)) for k, v in stated.items()),
    )
    try:
        done = import_request(request)
    except InputError as error:
        raise with_argument(error) from None
    return [item.record.key for item in done]


class Reproduced:
    """Which configuration computes your map: the answer, and every configuration tried
    (``segdiff reproduce --json``)."""

    def __init__(self, answer: Reproduction, search: ReproduceSearch) -> None:
        self.answer = answer
        self.sentence: str = answer.sentence()
        match = answer.match
        #: The matching run's label (``"cpu b1 onednn-off"``), or None.
        self.match: str | None = match.label if match else None
        #: ``segdiff_gui.run(model, **run_arguments, cache=cache)`` computes the match again:
        #: a cache hit (the request its run was made by, every model setting with it).
        self.run_arguments: dict[str, Any] | None = (
            _run_arguments(search.request_for([match.candidate])) if match else None
        )

    @property
    def table(self) -> Table:
        """One row per configuration tried: its label, what it changes, and how far its map
        is from yours (differing pixels, max ULP)."""
        return make_table(self._trials())

    def to_dict(self) -> dict[str, Any]:
        """What ``segdiff reproduce --json`` prints, with :attr:`run_arguments` for its
        ``command``."""
        return {**self.answer.to_dict(), "run_arguments": self.run_arguments}

    def _trials(self) -> list[dict[str, Any]]:
        """The trials as rows of a table: their changes in words."""
        return [
            {**trial, "changes": " + ".join(trial["changes"]) or "none"}
            for trial in self.to_dict()["trials"]
        ]

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{escape(t['label'])}</td><td>{escape(t['changes'])}</td>"
            f"<td>{t['differing_pixels']:,}</td><td>{t['max_ulp']:,}</td></tr>"
            for t in self._trials()
        )
        return html_document(
            f"<p><b>{escape(self.sentence)}</b></p><table><tr><th>run</th><th>changes</th>"
            f"<th>differing pixels</th><th>max ULP</th></tr>{rows}</table>"
        )

    def __repr__(self) -> str:
        return printable(f"<Reproduced: {self.sentence}>")


def _run_arguments(request: MatrixRequest) -> dict[str, Any]:
    """:func:`segdiff_gui.run`'s arguments, but the model and the cache, that make
    ``request``'s runs: its images, configurations, target, repeats and every model setting
    away from its default (core/model_settings.option_values, which ``segdiff run``'s words are
    written from too)."""
    settings: dict[str, Any] = option_values(request.settings)
    preprocess = settings.pop("preprocess", None) or {
        key: settings.pop(key) for key in PREPROCESS_KEYS if key in settings
    }
    specs = [request.knobs.changed_spec(config) for config in request.configs]
    return {
        "images": [str(path) for path in request.images],
        **({"configs": specs[0] if len(specs) == 1 else specs} if specs else {}),
        **({"target": request.target} if request.target is not None else {}),
        "repeats": request.repeats,
        **({"preprocess": preprocess} if preprocess else {}),
        **settings,
    }


def _follow(progress: bool) -> Any:
    def drive(runner: MatrixRunner) -> MatrixOutcome:
        bar = ProgressBar(progress, "runs")
        try:
            return follow(runner, bar)
        finally:
            bar.close()

    return drive


def reproduce_in(
    request: MatrixRequest,
    user_map: object,
    progress: bool = True,
    config: ConfigLike | None = None,
) -> Reproduced:
    """Search ``request``'s model, images and settings for ``user_map`` (an array of the
    target, or the maps of a file), from ``config`` (default: the defaults)."""
    if isinstance(user_map, str | Path):
        maps = open_maps(checked_path(user_map, "map"))
        name = str(user_map)
    else:
        values = np.asarray(user_map)
        if values.ndim not in (2, 3):
            raise InputError("map", f"has shape {values.shape}: give the target's map, H×W[×C]")
        maps = MapFile.of_array("map", values)  # checked as a file's map is
        name = "map"
    base = configuration(config) if config is not None else RunConfig()
    search = ReproduceSearch(maps, request, name, base)
    try:
        answer = search_for(search, _follow(progress))
    except InputError as error:
        raise with_argument(error) from None
    return Reproduced(answer, search)


def reproduce(
    user_map: PathLike | np.ndarray,
    model: PathLike,
    images: PathLike | Sequence[PathLike],
    *,
    target: str | None = None,
    config: ConfigLike | None = None,
    preprocess: Preprocessing | Mapping[str, Any] | str | None = None,
    output: str | int | None = None,
    activation: str = "none",
    trust_model: bool = False,
    trust_preprocess: bool = False,
    cache: PathLike | ResultCache | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> Reproduced:
    """Find the configuration that computes your map bit for bit, as ``segdiff reproduce``.

    ``user_map`` is the target's map (an array, or a ``.npy``/``.npz``/TIFF file of it);
    ``images`` are in your pipeline's order (``model.predict`` batches them by 32). The
    defaults under every runtime the model file runs under (Keras 3, and Keras 2 for a
    ``.h5``), or ``config`` (``"runtime=jax"`` for a pipeline on Keras's JAX backend), are
    tried first, then one knob at a time (oneDNN, the batch, XLA, threads, the arithmetic of
    the scaling), then pairs; every run is cached like any other.
    """
    request = MatrixRequest(
        check_model_path(checked_path(model, "model")),
        tuple(image_paths(images)),
        cache_of(cache),
        target=target,
        settings=model_settings(preprocess, output, activation, trust_model, trust_preprocess),
        timeout_s=positive(timeout, "timeout"),
    )
    return reproduce_in(replace(request, repeats=1), user_map, progress, config)
