"""The user's own artefacts as models (issue 51): a ``.tflite`` flatbuffer, an ``.onnx`` model
and an OpenVINO IR (``.xml`` with its ``.bin``), each run as it is, under the runtime its format
names, as its users' code runs it, never converted or modified.

Written once here: which file is an artefact (by its name, as every front end asks
``is_model_path``), which files it is made of (an IR's ``.bin``: hashed into the key with it),
which runtimes run it (the first its own: the runtime knob at its default means it), and what a
configuration means for it (:func:`for_artefact`: the runtime resolved, any knob the runtime
refuses and a batch the artefact cannot take refused in one line naming the file). Reading an
artefact's bytes is ``io/artefacts.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtimes import RUNTIMES

__all__ = [
    "ARTEFACT_FORMATS",
    "ArtefactFormat",
    "artefact_format",
    "artefact_files",
    "base_config",
    "fixed_batch_line",
    "for_artefact",
]


@dataclass(frozen=True)
class ArtefactFormat:
    name: str  # as a run's provenance records it: "tflite", "onnx", "openvino-ir"
    suffix: str  # the file's (lower case)
    title: str  # in sentences: "a LiteRT flatbuffer"
    runtimes: tuple[str, ...]  # the runtimes that run it as it is; the first is its own
    companion: str = ""  # the suffix of the file beside it that it reads ("": none)

    @property
    def runtime(self) -> str:
        """Its own runtime: what the runtime knob at its default means for it."""
        return self.runtimes[0]


ARTEFACT_FORMATS: tuple[ArtefactFormat, ...] = (
    ArtefactFormat("tflite", ".tflite", "a LiteRT flatbuffer", ("litert",)),
    ArtefactFormat("onnx", ".onnx", "an ONNX model", ("onnxruntime", "openvino")),
    ArtefactFormat("openvino-ir", ".xml", "an OpenVINO IR", ("openvino",), companion=".bin"),
)
_BY_SUFFIX = {artefact.suffix: artefact for artefact in ARTEFACT_FORMATS}


def artefact_format(path: str | Path) -> ArtefactFormat | None:
    """The artefact format ``path`` names by its suffix, or None (a Keras model, a
    SavedModel, or no model)."""
    return _BY_SUFFIX.get(Path(path).suffix.lower())


def artefact_files(path: str | Path) -> tuple[Path, ...]:
    """The files an artefact is made of, itself first: an IR's ``.xml`` and the ``.bin``
    beside it of the same stem (what OpenVINO reads), every other artefact its one file."""
    path = Path(path)
    found = artefact_format(path)
    if found is None or not found.companion:
        return (path,)
    return (path, path.with_suffix(found.companion))


def base_config(path: str | Path) -> RunConfig:
    """The configuration a ``--config`` of ``path`` starts from: an artefact's own runtime
    (so ``xnnpack=off`` needs no ``runtime=litert`` beside it), else every default."""
    found = artefact_format(path)
    return RunConfig(runtime=found.runtime) if found else RunConfig()


def fixed_batch_line(batch: int, fixed: int) -> str:
    """Why a batch other than an artefact's fixed one cannot run it (after the file's name)."""
    return (
        f"has a fixed batch of {fixed} (its input's first dimension): batch={batch} cannot run "
        f"it as it is (batch={fixed})"
    )


def for_artefact(config: RunConfig, path: str | Path, fixed_batch: int | None) -> RunConfig:
    """``config`` as it runs the artefact at ``path``: the runtime knob at its default becomes
    the artefact's own runtime; a runtime that does not run the artefact as it is, a knob value
    that runtime refuses, or a batch the artefact's fixed batch (``fixed_batch``; None: free)
    is not, is refused as an :class:`InputError` naming the file, in the registry's words."""
    found = artefact_format(path)
    assert found is not None, f"{path} is not an artefact"
    runtime = config.runtime
    if runtime == KNOBS.default("runtime"):
        runtime = found.runtime
    if runtime not in found.runtimes:
        titles = " or ".join(RUNTIMES[name].family for name in found.runtimes)
        choices = "|".join(found.runtimes)
        converts = " (it converts a Keras model)" if RUNTIMES[runtime].conversion else ""
        raise InputError(
            path,
            f"is {found.title}: it runs as it is under {titles}, not under "
            f"{RUNTIMES[runtime].title}{converts} (runtime={choices})",
        )
    try:
        resolved = replace(config, runtime=runtime)
    except ConfigError as error:
        raise InputError(path, f"is {found.title}: {error}") from None
    if fixed_batch is not None and resolved.batch != fixed_batch:
        raise InputError(path, fixed_batch_line(resolved.batch, fixed_batch))
    return resolved
