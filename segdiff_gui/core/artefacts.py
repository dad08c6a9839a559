"""The user's own artefacts as models: a ``.tflite`` flatbuffer, an ``.onnx`` model
and an OpenVINO IR (``.xml`` with its ``.bin``), each run as it is, under the runtime its format
names, as its users' code runs it, never converted or modified.

Written once here: which file is an artefact (by its name, as every front end asks
``is_model_path``), which files it is made of (an IR's ``.bin``: hashed into the key with it),
which runtimes run it (the first its own: the runtime knob at its default means it), and what a
configuration means for it (:func:`for_artefact`: the runtime resolved, any knob the runtime
refuses and a batch the artefact cannot take refused in one line naming the file). Reading an
artefact's bytes is ``io/artefacts.py``'s.

Beside its Keras source (``--source model.keras``, :class:`KerasSource`): the artefact's runs
are keyed and recorded with the source's hash, so that they join the source's runs in one
study (one group), named apart by the artefact's file name before their label
(:func:`beside_source`); an artefact that does not take the source's input or give its
outputs is refused in one line naming both shapes (:func:`source_misfit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import ConfigError, InputError
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.text import printable

__all__ = [
    "ARTEFACT_FORMATS",
    "ArtefactFormat",
    "KerasSource",
    "artefact_format",
    "artefact_files",
    "base_config",
    "beside_source",
    "fixed_batch_line",
    "for_artefact",
    "source_misfit",
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


@dataclass(frozen=True)
class KerasSource:
    """The Keras model an artefact was converted from, as the artefact's runs beside it carry
    it: its file's name and hash (keyed and recorded: the runs' group is the source's), and
    where a child loads it from (a layer probe matches the artefact's tensors to its layers;
    neither keyed nor stored)."""

    name: str
    sha256: str
    path: str = ""

    def to_dict(self) -> dict[str, str]:
        """As a run's provenance records it (``source_model``) and a job carries it."""
        return {"name": self.name, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Any, path: str = "") -> KerasSource | None:
        """What :meth:`to_dict` wrote; None for anything else (a run recorded without one)."""
        if not isinstance(data, dict):
            return None
        name, digest = data.get("name"), data.get("sha256")
        if not isinstance(name, str) or not isinstance(digest, str) or not digest:
            return None
        return cls(name, digest, path)


def beside_source(artefact_name: str, label: str) -> str:
    """An artefact's run as it is named beside its source's runs, in every front end: the
    artefact's file name before the configuration (``int8.tflite litert cpu b1``), so that
    it never looks like the source's own run of that runtime (segdiff's conversion)."""
    return f"{printable(artefact_name)} {label}"


Shape = Sequence[int | None]


def _fits(ours: Shape, theirs: Shape) -> bool:
    """Two shapes without their batch agree where both are known."""
    if len(ours) != len(theirs):
        return False
    return all(a is None or b is None or a == b for a, b in zip(ours[1:], theirs[1:], strict=True))


def _shape(dims: Shape) -> str:
    return "×".join("N" if index == 0 else "?" if d is None else str(d) for index, d in
                    enumerate(dims))  # fmt: skip


def source_misfit(
    artefact_input: Shape,
    artefact_outputs: Sequence[Shape],
    source_input: Shape,
    source_outputs: Sequence[Shape],
) -> str:
    """Why an artefact does not fit its Keras source, after the artefact's name, naming both
    shapes ("" when it fits): it must take the source's input (height, width and channels,
    ``*_input``, where both fix them) and give as many outputs, each of the source's shape
    (batch first; so of its meaning: one sigmoid channel or as many softmax classes)."""
    artefact_input, source_input = (None, *artefact_input[-3:]), (None, *source_input[-3:])
    if not _fits(artefact_input, source_input):
        return f"takes input {_shape(artefact_input)} where its source takes {_shape(source_input)}"
    if len(artefact_outputs) != len(source_outputs):
        return f"gives {len(artefact_outputs)} outputs where its source gives {len(source_outputs)}"
    for index, (ours, theirs) in enumerate(zip(artefact_outputs, source_outputs, strict=True)):
        if not _fits(ours, theirs):
            which = f"output {index}" if len(source_outputs) > 1 else "its output"
            return (
                f"gives {which} as {_shape(ours)}{_meaning(ours, theirs)} where its source "
                f"gives {_shape(theirs)}{_meaning(theirs, ours)}"
            )
    return ""


def _meaning(shape: Shape, other: Shape) -> str:
    """What a map's channels mean, where the two shapes differ in them."""
    channels, others = (shape[-1] if shape else None), (other[-1] if other else None)
    if channels is None or channels == others:
        return ""
    return " (one sigmoid channel)" if channels == 1 else f" ({channels} softmax classes)"
