"""The user's own artefact as the run loop's model: its bytes, read once and held
to the hash its runs were planned with, and what it takes and gives, read from those bytes
(``io/artefacts.py``, the parent's very check). No Keras, no TensorFlow: the artefact's
runtime (LiteRT, ONNX Runtime, OpenVINO) opens it from these bytes, as its users' code opens
the file, and nothing else is imported for it.

:func:`load_any` is the run loop's one loader: an artefact here, any other model through
``models.load_model`` (imported only then: it imports Keras)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segdiff_gui.core.artefacts import artefact_format
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import hash_bytes, model_digest
from segdiff_gui.io.artefacts import (
    ArtefactFacts,
    artefact_facts_of,
    read_artefact_bytes,
    read_weights,
)

if TYPE_CHECKING:
    from segdiff_gui.engine.models import LoadedModel

__all__ = [
    "LoadedArtefact",
    "artefact_of",
    "is_artefact",
    "keras_loaded",
    "load_any",
    "load_artefact",
]


@dataclass
class LoadedArtefact:
    """An artefact as the run loop sees a model: its input and outputs, and its bytes."""

    path: Path
    facts: ArtefactFacts
    data: bytes  # the file's (an IR's .xml)
    weights: bytes = b""  # an IR's .bin
    keras_model: None = None  # none: the artefact runs as it is

    @property
    def format(self) -> str:
        return self.facts.format.name

    @property
    def input_shape(self) -> tuple[int | None, int | None, int | None]:
        return self.facts.input_shape

    @property
    def output_names(self) -> list[str]:
        return [output.name for output in self.facts.outputs]

    @property
    def output_shapes(self) -> list[tuple[int | None, ...]]:
        """Each output's shape without the batch, as the artefact declares it."""
        return [output.shape[1:] for output in self.facts.outputs]


def is_artefact(path: str | Path) -> bool:
    return artefact_format(path) is not None


def load_artefact(path: str | Path, model_hash: str) -> LoadedArtefact:
    """The artefact at ``path``, its bytes those the runs were planned with (``model_hash``,
    ``core/hashing.hash_model``'s), checked again from those bytes."""
    path = Path(path)
    data = read_artefact_bytes(path)
    weights = read_weights(path)
    found = artefact_format(path)
    assert found is not None
    read = (
        model_digest([(path.suffix, hash_bytes(data)), (found.companion, hash_bytes(weights))])
        if found.companion
        else hash_bytes(data)
    )
    if read != model_hash:
        raise InputError(path, "changed after segdiff planned the runs; run again")
    return LoadedArtefact(path, artefact_facts_of(path, data), data, weights)


def load_any(
    path: str | Path,
    trust: bool,
    model_hash: str,
    keras: Callable[[str, bool], LoadedModel] | None = None,
) -> LoadedModel | LoadedArtefact:
    """The model at ``path`` as the run loop runs it: an artefact as it is, any other model
    loaded by Keras, under the device scope the caller entered: by ``keras``, the runtime's
    loader (``Backend.load_model``: Keras 3's, or Keras 2's under tf_keras), else
    ``models.load_model``."""
    if is_artefact(path):
        return load_artefact(path, model_hash)
    if keras is not None:
        return keras(str(path), trust)
    from segdiff_gui.engine.models import load_model  # imports Keras

    return load_model(path, trust)


def artefact_of(model: Any) -> LoadedArtefact | None:
    """``model`` where it is an artefact (a backend runs it as it is), else None."""
    return model if isinstance(model, LoadedArtefact) else None


def keras_loaded(model: LoadedModel | LoadedArtefact) -> LoadedModel:
    """``model`` where it is a Keras model or a SavedModel, for what walks its layers (the
    layer probe); an artefact is refused in one line naming it."""
    if isinstance(model, LoadedArtefact):
        raise InputError(
            model.path,
            "is your own artefact: its layers are compared against its Keras source, which "
            "this version does not take yet (compare its runs with segdiff run or compare)",
        )
    return model
