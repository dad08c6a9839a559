"""``segdiff_gui.run``: a model on images under a matrix of configurations, from Python. The
arguments become the one :class:`MatrixRequest` every front end builds (the same runs and
cache entries as ``segdiff run`` with the same options); TensorFlow runs only in the children,
so a notebook's kernel never imports it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from segdiff_gui.api.arguments import (
    ConfigLike,
    PathLike,
    cache_of,
    checked_cutoff,
    checked_path,
    configurations,
    image_paths,
    model_settings,
    positive,
    whole_number,
)
from segdiff_gui.api.compute import compute
from segdiff_gui.api.recompute import test_set
from segdiff_gui.api.results import Sweep
from segdiff_gui.api.study import Study
from segdiff_gui.core.config import Preprocessing
from segdiff_gui.core.defaults import DEFAULT_CUTOFF, DEFAULT_REPEATS, DEFAULT_TIMEOUT_S
from segdiff_gui.core.errors import InputError
from segdiff_gui.runner.devices import ProbeError, gpu_names, probe_devices
from segdiff_gui.runner.plan import check_model_path, check_source
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.loading import ChosenGroup
from segdiff_gui.storage.studies import natural_order

__all__ = ["devices", "run", "sweep"]


def checked_source(model: Path, source: PathLike | None) -> Path | None:
    """The Keras source of the artefact ``model``, checked (None where none is given)."""
    if source is None:
        return None
    return Path(check_source(model, checked_path(source, "source")).path)


def devices(cache: PathLike | ResultCache | None = None) -> list[str]:
    """The devices a configuration can name.

    Returns
    -------
    list of str
        ``"cpu"`` and every GPU TensorFlow sees (``"gpu:0"``, …), asked of a child process
        once per machine and then remembered in the cache (which must be, or become, a
        segdiff cache: a folder of other files is refused).
    """
    store = cache_of(cache)
    store.claim()
    try:
        return ["cpu", *gpu_names(probe_devices(store.root))]
    except ProbeError as error:
        raise InputError("tensorflow", str(error)) from None


def run(
    model: PathLike,
    images: PathLike | Sequence[PathLike],
    configs: ConfigLike | Sequence[ConfigLike] | None = None,
    *,
    repeats: int = DEFAULT_REPEATS,
    preprocess: Preprocessing | Mapping[str, Any] | str | None = None,
    output: str | int | None = None,
    activation: str = "none",
    trust_model: bool = False,
    trust_preprocess: bool = False,
    target: str | None = None,
    cache: PathLike | ResultCache | None = None,
    cutoff: float = DEFAULT_CUTOFF,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
    source: PathLike | None = None,
    source_configs: ConfigLike | Sequence[ConfigLike] | None = None,
) -> Study:
    """Run ``model`` on ``images`` under every configuration, ``repeats`` times each, in
    isolated TensorFlow processes, and return the study of the target image.

    Parameters
    ----------
    model : str or Path
        A Keras model file (``.keras``, ``.h5``) or SavedModel folder, or your own artefact
        (``.tflite``, ``.onnx``, an OpenVINO IR ``.xml``), run as it is under its runtime.
    images : str, Path or a sequence of them
        Image files (PNG, JPEG, TIFF, NPY) and folders of them. Batches of more than one are
        filled from these images, in order (the batch's context changes results too).
    configs : spec, dict, RunConfig, or a list of them, optional
        The configurations: ``"device=cpu,batch=64"``, ``{"device": "gpu:0", "tf32": False}``.
        Unnamed knobs keep their defaults; an artefact's start from its own runtime
        (``"xnnpack=off"`` alone). Default: batch 1 and 64 on every device present.
    repeats : int
        Runs of each configuration (on a GPU, repeats show nondeterminism).
    preprocess : dict, Preprocessing or str, optional
        How an image becomes the model's input: ``divide`` (x / D in float32; default 255
        for 8-bit images, 65535 for 16-bit) or ``scale`` (x * float32(X), a number or text
        like ``"1/255"``), ``mean`` and ``std`` (per channel, after scaling), ``color``
        (``keep``, ``gray``, ``rgb``), ``resize`` (``refuse``, ``bilinear``). Or your own
        function as ``"prepare.py:prepare"`` (image array → model input), which runs in the
        child only with ``trust_preprocess=True``.
    output : str or int, optional
        Which output of a multi-output model is the map (its name or index).
    activation : {"none", "sigmoid", "softmax"}
        Applied to raw logits; ``none`` when the model outputs probabilities.
    trust_model : bool
        Let code in the model (Lambda layers) run: Keras safe mode off. Trust only models
        whose source you trust.
    trust_preprocess : bool
        Let your preprocessing function run (in the child): it can do anything your user can.
    target : str, optional
        The image studied, by file name (default: the first).
    cache : str, Path or ResultCache, optional
        Where maps are cached (default: ``$SEGDIFF_CACHE`` or the user cache folder). A run
        already there is not computed again.
    cutoff : float
        The class cutoff (between 0 and 1) the study's questions use unless given one.
    timeout : float
        Seconds a child may stay silent before it is killed (its run fails).
    progress : bool
        Show a progress bar (in Jupyter, tqdm's notebook bar) while runs compute.
    source : str or Path, optional
        The Keras model (``.keras``, ``.h5``) your artefact ``model`` was converted from: its
        runs beside the artefact's, on the same images and settings, in one study (the exact
        float64 run made from it); the artefact's runs are named with its file name.
    source_configs : spec, dict, RunConfig, or a list of them, optional
        The source's configurations (default: each of the artefact's devices and batches
        at the source's defaults, and ``precision=float64``).

    Returns
    -------
    Study
        The runs of the target image; ``study.failures`` lists runs that failed.

    Raises
    ------
    InputError
        A file, setting or configuration that cannot be used, named in one line.
    KeyboardInterrupt
        When the cell is interrupted: the child in flight is killed first; finished runs stay
        cached.
    """
    checked_cutoff(cutoff)  # before any run: a typo must not cost a matrix
    request = _request(
        model, images, configs, repeats=repeats, preprocess=preprocess, output=output,
        activation=activation, trust_model=trust_model, trust_preprocess=trust_preprocess,
        target=target, cache=cache, timeout=timeout, source=source,
        source_configs=source_configs,
    )  # fmt: skip
    records, outcome = compute(request, progress)
    if not records:
        reasons = "; ".join(f"{f['label']}: {f['error']}" for f in outcome.failed[:3])
        raise InputError(request.model, f"no run finished ({reasons})")
    return Study(
        request.cache,
        ChosenGroup.of_runs(sorted(records, key=natural_order)),
        cutoff=cutoff,
        where=str(request.cache.root),
        request=request,
        failures=outcome.failed,
        progress=progress,
    )


def sweep(
    model: PathLike,
    images: PathLike | Sequence[PathLike],
    configs: ConfigLike | Sequence[ConfigLike] | None = None,
    *,
    masks: str | Path | None = None,
    ref: str | None = None,
    repeats: int = DEFAULT_REPEATS,
    preprocess: Preprocessing | Mapping[str, Any] | str | None = None,
    output: str | int | None = None,
    activation: str = "none",
    trust_model: bool = False,
    trust_preprocess: bool = False,
    cache: PathLike | ResultCache | None = None,
    cutoff: float = DEFAULT_CUTOFF,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> Sweep:
    """Run ``model`` over the whole test set ``images`` under every configuration, as your
    ``model.predict(x, batch_size=B)`` runs it (the images in order, cut into batches of B,
    each batch computed once), and summarise it (``segdiff run --sweep``). Runs already in
    the cache are not computed again; :meth:`Study.sweep` does the same for a study made by
    :func:`run`, after computing its target image.

    Parameters
    ----------
    masks : str or Path, optional
        A folder of ground-truth masks named as the images: adds mean Dice and IoU and how
        far they move.
    ref : str, optional
        The reference configuration (default: ``cpu b1``, else the first).
    model, images, configs, repeats, preprocess, output, activation, trust_model,
    trust_preprocess, cache, cutoff, timeout, progress
        As for :func:`run`.

    Returns
    -------
    Sweep
        Per configuration: images with flips, flips, at-risk pixels, max ULP, and with masks
        the mean Dice and IoU; per image, the same. ``sweep.failures`` lists runs that failed.

    Raises
    ------
    InputError
        A file, setting or configuration that cannot be used, named in one line.
    """
    cutoff = checked_cutoff(cutoff)  # before any run: a typo must not cost a test set
    request = _request(
        model, images, configs, repeats=repeats, preprocess=preprocess, output=output,
        activation=activation, trust_model=trust_model, trust_preprocess=trust_preprocess,
        target=None, cache=cache, timeout=timeout, source=None, source_configs=None,
    )  # fmt: skip
    return test_set(
        request.cache, (), group=None, request=request, masks=masks, cutoff=cutoff, ref=ref,
        progress=progress,
    )  # fmt: skip


def _request(
    model: PathLike,
    images: PathLike | Sequence[PathLike],
    configs: ConfigLike | Sequence[ConfigLike] | None,
    *,
    repeats: int,
    preprocess: Preprocessing | Mapping[str, Any] | str | None,
    output: str | int | None,
    activation: str,
    trust_model: bool,
    trust_preprocess: bool,
    target: str | None,
    cache: PathLike | ResultCache | None,
    timeout: float,
    source: PathLike | None,
    source_configs: ConfigLike | Sequence[ConfigLike] | None,
) -> MatrixRequest:
    """The request of :func:`run` and :func:`sweep`, checked as the CLI checks its own: the
    arguments first, then the files (the device probe and the runs come after)."""
    settings = model_settings(preprocess, output, activation, trust_model, trust_preprocess)
    model_path = checked_path(model, "model")
    chosen = configurations(configs, model_path)
    beside = configurations(source_configs)
    if beside and source is None:
        raise InputError("source_configs", "configures the source; give the source too")
    count, seconds = whole_number(repeats, "repeats"), positive(timeout, "timeout")
    checked = check_model_path(model_path)
    keras = checked_source(checked, source)
    return MatrixRequest(
        checked,
        tuple(image_paths(images)),
        cache_of(cache),
        configs=chosen,
        repeats=count,
        target=target,
        settings=settings,
        timeout_s=seconds,
        source=keras,
        source_configs=beside,
    )
