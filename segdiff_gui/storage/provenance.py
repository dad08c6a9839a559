"""Where a stored run came from, as a typed value: :class:`Provenance`.

A run's provenance is what its child read back and recorded (device, host, versions, the
settings in effect, the numerics-changing environment), what was stated of a map imported from
the user's own pipeline, and where a merged run came from. It is stored as attributes (see
:mod:`segdiff_gui.storage.records`, which checks them as untrusted data when a run is read) and
crosses rooms as this value: readers use its typed properties, and :meth:`Provenance.to_dict`
gives every attribute back, as stored, only where it is written (HDF5, JSON). Attributes this
version of segdiff does not know (a newer writer's) are kept as they were, so a run moved
through a bundle keeps them all.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from segdiff_gui.core.artefacts import KerasSource
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.runtime_defaults import (
    DefaultsInEffect,
    inference_precision_in_effect,
    on_off,
    onednn_in_effect,
    session_settings_in_effect,
)
from segdiff_gui.core.runtimes import calibration_tag, recorded_version

# An element type as OpenVINO names it (``bf16``, ``f32``): what a stored precision may be.
_TYPE_NAME = re.compile(r"[a-z][a-z0-9]{0,7}")

__all__ = ["Provenance", "StatedImport"]


@dataclass(frozen=True)
class StatedImport:
    """What was stated of a map imported from the user's own pipeline (``segdiff import``):
    stated, never measured, and shown as such."""

    map_sha256: str  # the digest its run's key holds ("" where none was recorded)
    label: str
    file: str
    source_dtype: str
    notes: dict[str, str]  # what the user said of it (``device=colab T4``), as text

    @classmethod
    def from_dict(cls, stated: Mapping[str, Any]) -> StatedImport:
        digest = stated.get("map_sha256")
        notes = stated.get("notes")
        return cls(
            map_sha256=digest if isinstance(digest, str) else "",
            label=str(stated.get("label", "map")),
            file=str(stated.get("file", "?")),
            source_dtype=str(stated.get("source_dtype", "")),
            notes={str(k): f"{v}" for k, v in notes.items()} if isinstance(notes, Mapping) else {},
        )


@dataclass(frozen=True)
class Provenance:
    """A stored run's provenance. Build it with :meth:`from_dict` (a writer's edge) and read
    it through its properties; :meth:`to_dict` is every attribute as stored."""

    _attributes: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, attributes: Mapping[str, Any]) -> Provenance:
        """The provenance of ``attributes`` (copied: the value never changes under a reader)."""
        return cls(copy.deepcopy(dict(attributes)))

    def __repr__(self) -> str:
        """What a notebook shows: where the run ran and with what (``to_dict()``: all)."""
        stated = self.imported
        shown = {
            "device": self.device,
            "runtime": f"{self.runtime} {self.version}".rstrip(),
            "host": self.hostname,
            "imported": stated.label if stated else None,
        }
        said = ", ".join(f"{name}={value!r}" for name, value in shown.items() if value)
        return f"Provenance({said})"

    def to_dict(self) -> dict[str, Any]:
        """Every attribute as stored, unknown ones included: for HDF5 and JSON only."""
        return copy.deepcopy(dict(self._attributes))

    @property
    def attributes(self) -> Mapping[str, Any]:
        """Every attribute as stored, to read only (what is written or summed), uncopied: a
        sweep writes and checks thousands of runs. The view is read-only at its top level;
        its lists and dicts are this provenance's own, never to be changed: :meth:`to_dict`
        gives a copy to change."""
        return MappingProxyType(self._attributes)

    def updated(self, attributes: Mapping[str, Any]) -> Provenance:
        """This provenance with ``attributes`` added or replaced (a merge marks its runs)."""
        return Provenance.from_dict({**self._attributes, **attributes})

    # where it ran ------------------------------------------------------------------------
    def _text(self, name: str) -> str | None:
        value = self._attributes.get(name)
        return None if value is None else str(value)

    def _switch(self, name: str) -> bool | None:
        value = self._attributes.get(name)
        return value if isinstance(value, bool) else None

    @property
    def device(self) -> str | None:
        """The device the output was on (``cpu:0``, ``gpu:0``)."""
        return self._text("device")

    @property
    def hostname(self) -> str | None:
        return self._text("hostname")

    @property
    def timestamp(self) -> str | None:
        return self._text("timestamp")

    @property
    def runtime(self) -> str:
        """The runtime that computed the run (TensorFlow where none was recorded)."""
        runtime = self._text("runtime")
        return "tensorflow" if runtime is None else runtime

    @property
    def version(self) -> str:
        """The runtime's version as every front end shows it (``recorded_version``'s rule)."""
        return recorded_version(self._attributes)

    @property
    def machine(self) -> str:
        """What tells two machines' results apart: the host, the device and TensorFlow.

        TensorFlow's version, or another runtime's (JAX and PyTorch runs record no
        ``tf_version``). Not :attr:`version`, which shows a converted run's runtime first:
        this is part of the key a merged run gets (``elsewhere_key``), as stores hold it."""
        values = self._attributes
        version = values.get("tf_version") or values.get("runtime_version")
        return canonical_json([values.get("hostname"), values.get("device_description"), version])

    @property
    def environment(self) -> dict[str, str]:
        """The numerics-changing environment variables the child had (checked when read)."""
        environment = self._attributes.get("environment", {})
        return dict(environment) if isinstance(environment, Mapping) else {}

    # what it computed with ---------------------------------------------------------------
    @property
    def onednn_enabled(self) -> bool | None:
        """Whether oneDNN was on in the run's process, where recorded."""
        return self._switch("onednn_enabled")

    @property
    def inference_precision(self) -> str | None:
        """What OpenVINO's compiled model computed in (``bf16``, ``f32``), as the child read
        it back; ``None`` for another runtime's run (or anything but a short type name)."""
        value = self._text("inference_precision")
        return value if value is not None and _TYPE_NAME.fullmatch(value) else None

    @property
    def xnnpack(self) -> bool | None:
        """Whether LiteRT's interpreter ran the graph in XNNPACK, as the child read it back
        from its execution plan; ``None`` for another runtime's run."""
        return self._switch("litert_xnnpack")

    @property
    def graph_optimization(self) -> str | None:
        """ONNX Runtime's graph optimisation level, as its session reported it (``all``)."""
        value = self._text("onnxruntime_graph_optimization")
        return value if value is not None and _TYPE_NAME.fullmatch(value) else None

    @property
    def xla(self) -> bool | None:
        """Whether the forward pass was compiled with XLA: the configuration's, a default
        resolved as ``model.predict`` would (the JAX placement line says how it ran)."""
        return self._switch("xla")

    @property
    def op_determinism(self) -> bool | None:
        return self._switch("op_determinism")

    @property
    def tf32_enabled(self) -> bool | None:
        return self._switch("tf32_enabled")

    @property
    def emulation(self) -> str | None:
        """What a run that emulated a GPU's arithmetic on the CPU rounded (``emulate=tf32``),
        as its child said it: ``TF32 emulated on this CPU (…): 11 convolutions rounded``."""
        return self._text("emulation")

    @property
    def wall_time_s(self) -> float | None:
        """The forward pass's wall time in seconds, where recorded."""
        wall = self._attributes.get("wall_time_s")
        return float(wall) if isinstance(wall, int | float) and not isinstance(wall, bool) else None

    @property
    def intra_op_threads(self) -> int | None:
        threads = self._attributes.get("intra_op_threads")
        return threads if isinstance(threads, int) else None

    @property
    def defaults_in_effect(self) -> DefaultsInEffect:
        """What the run's unset knobs were on the machine that computed it (keyed with it)."""
        recorded = self._attributes.get("defaults_in_effect")
        return DefaultsInEffect.from_dict(recorded if isinstance(recorded, Mapping) else {})

    @property
    def calibration_hashes(self) -> list[str] | None:
        """A full-int8 run's calibration images, as their hashes (``None`` for other runs)."""
        hashes = self._attributes.get("calibration_hashes")
        return [str(h) for h in hashes] if isinstance(hashes, list) else None

    @property
    def calibration_tag(self) -> str:
        """The calibration tag of a full-int8 run (``cal16#3fa2``; "" for every other run)."""
        hashes = self.calibration_hashes
        return calibration_tag(hashes) if hashes else ""

    # where it came from ------------------------------------------------------------------
    @property
    def source(self) -> KerasSource | None:
        """The Keras model an artefact's run sits beside (its name and hash: keyed, and its
        group's model), or None for every other run."""
        return KerasSource.from_dict(self._attributes.get("source_model"))

    @property
    def imported(self) -> StatedImport | None:
        """What was stated of a map imported from the user's own pipeline, or ``None`` for a
        run segdiff computed."""
        stated = self._attributes.get("imported")
        return StatedImport.from_dict(stated) if isinstance(stated, Mapping) else None

    @property
    def imported_digest(self) -> str:
        """An imported map's SHA-256 as its key holds it ("" for a run segdiff computed)."""
        stated = self.imported
        return stated.map_sha256 if stated else ""

    @property
    def merged_from_key(self) -> str | None:
        """The key a run from another machine had there (it is kept under another key here
        beside this machine's run); checked as a run key when read."""
        return self._text("merged_from_key")

    @property
    def merged_from_bundle(self) -> str | None:
        """The file name of the bundle the run was merged from."""
        return self._text("merged_from_bundle")

    @property
    def merged(self) -> bool:
        """Whether the run came into this cache from a bundle (computed elsewhere, or claimed
        to)."""
        return "merged_from_bundle" in self._attributes or "merged_from_key" in self._attributes

    # as people read it -------------------------------------------------------------------
    def onednn_in_effect(self, config: RunConfig) -> str:
        """``off: TensorFlow's default on this CPU``, ``on: set (onednn=on)``; "" where the
        runtime has no oneDNN switch or nothing was recorded."""
        return onednn_in_effect(config, self.runtime, self.onednn_enabled)

    def inference_precision_in_effect(self, config: RunConfig) -> str:
        """``bf16: OpenVINO's default on this CPU``, ``f32: set (inference_precision=f32)``;
        "" for a run of another runtime."""
        return inference_precision_in_effect(config, self.inference_precision)

    def session_settings(self, config: RunConfig) -> list[tuple[str, str]]:
        """What a LiteRT, ONNX Runtime or OpenVINO session computed with, read back by its
        child: ``("XNNPACK", "on: the interpreter's default")`` …; none for other runtimes."""
        return session_settings_in_effect(config, self._attributes)

    def session_settings_text(self, config: RunConfig) -> str:
        """:meth:`session_settings` in one line, for reports and tables ("" when none)."""
        return "; ".join(f"{title} {text}" for title, text in self.session_settings(config))

    def in_effect_lines(self, config: RunConfig) -> list[str]:
        """What the run computed with, as its child read it back (an imported map: what was
        stated of it), a line each: for the window's inspector and the like."""
        if (stated := self.imported) is not None:
            said = ", ".join(f"{k}={v}" for k, v in stated.notes.items())
            return [
                f"imported from {stated.file} (stated, not measured)",
                *([f"notes: {said}"] if said else []),
            ]
        device = "?" if self.device is None else self.device
        lines = [f"on {device}, {self.runtime} {self.version}".rstrip()]
        if onednn := self.onednn_in_effect(config):
            lines.append(f"oneDNN {onednn}")
        if precision := self.inference_precision_in_effect(config):
            lines.append(f"inference precision {precision}")
        lines += [f"{title} {text}" for title, text in self.session_settings(config)]
        if (threads := self.intra_op_threads) is not None:
            lines.append(f"intra-op threads: {threads or 'the runtime default'}")
        switches = (
            ("XLA", self.xla, config.xla is None),  # unset: model.predict's choice
            ("op determinism", self.op_determinism, False),
            ("TF32", self.tf32_enabled, False),
        )
        for title, value, chosen in switches:
            if value is not None:
                lines.append(
                    f"{title} {on_off(value)}" + (" (model.predict's choice)" if chosen else "")
                )
        if emulation := self.emulation:
            lines.append(emulation)  # a prediction of a GPU, never taken for one
        if host := self.hostname:
            lines.append(f"host {host}")
        return lines
