"""The work order a runner hands to one engine child (as JSON on its stdin).

Every run of a job shares the child's process-level settings; everything else varies per run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from segdiff_gui.core.artefacts import KerasSource, beside_source
from segdiff_gui.core.config import OutputSelection, Preprocessing, RunConfig
from segdiff_gui.core.runtime_defaults import DefaultsInEffect

__all__ = ["HEARTBEAT_S", "EngineJob", "ImageRef", "PlannedRun", "heartbeat_for"]

# How often a child says "compiling kernels" while a first forward pass runs, under a runner
# whose no-progress deadline is long enough (``heartbeat_for`` shortens it for a short one).
HEARTBEAT_S = 15.0


@dataclass(frozen=True)
class ImageRef:
    path: str
    name: str
    hash: str


@dataclass(frozen=True)
class PlannedRun:
    """One run to compute: the target and every batch slot are indices into the job's images."""

    key: str
    config: RunConfig
    repeat: int
    target: int
    batch: tuple[int, ...]
    # What the configuration does not say but the label must: a full-int8 run's calibration
    # set (core/runtimes.calibration_tag), as the stored record's label will say it.
    tag: str = ""
    # What the configuration's unset knobs are on this machine (keyed): the child checks it.
    in_effect: DefaultsInEffect = field(default_factory=DefaultsInEffect)
    # A sweep's run: where the target sits in its batch, the set's consecutive images as
    # ``predict(x, batch_size)`` cuts them (keyed and stored); None: ``config.position``.
    batch_position: int | None = None
    # The artefact's file name, where its runs sit beside its Keras source's (named apart).
    beside: str = ""

    @property
    def position(self) -> int:
        """The target's row in the batch and in the model's output."""
        return self.config.position if self.batch_position is None else self.batch_position

    @property
    def computed(self) -> RunConfig:
        """The configuration as the child computes it: its unset XLA resolved as
        ``model.predict`` would (keyed and stored is :attr:`config`, as asked)."""
        return self.in_effect.applied(self.config)

    @property
    def label(self) -> str:
        """As the stored record's label will say it (storage/records.configuration_label):
        the calibration set, and the inference precision OpenVINO is predicted to choose."""
        tags = [self.tag, self.in_effect.inference_precision or ""]
        label = " ".join([self.config.label(), *filter(None, tags)])
        if self.beside:
            label = beside_source(self.beside, label)
        return f"{label} r{self.repeat}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "config": self.config.to_dict(),
            "repeat": self.repeat,
            "target": self.target,
            "batch": list(self.batch),
            "tag": self.tag,
            "in_effect": self.in_effect.to_dict(),
            "batch_position": self.batch_position,
            "beside": self.beside,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlannedRun:
        return cls(
            key=data["key"],
            config=RunConfig.from_dict(data["config"]),
            repeat=int(data["repeat"]),
            target=int(data["target"]),
            batch=tuple(data["batch"]),
            tag=str(data.get("tag", "")),
            in_effect=DefaultsInEffect.from_dict(data.get("in_effect", {})),
            batch_position=None
            if data.get("batch_position") is None
            else int(data["batch_position"]),
            beside=str(data.get("beside", "")),
        )


@dataclass(frozen=True)
class EngineJob:
    model_path: str
    model_hash: str
    trust_model: bool
    preprocessing: Preprocessing
    output: OutputSelection
    images: tuple[ImageRef, ...]
    cache_root: str
    runs: tuple[PlannedRun, ...] = field(default=())
    # The user's preprocessing function may run (ModelSettings.trust_preprocess).
    trust_preprocess: bool = False
    # A layer probe: each run's configuration is probed layer by layer into the
    # cache's layer store (its plain run must be cached already), pieces of at most a share
    # of this many bytes; 0: plain runs.
    probe_memory_budget: int = 0
    # How often the child says "compiling kernels" while a first forward pass runs: well
    # inside the runner's no-progress deadline (``heartbeat_for``), which it must never reach.
    heartbeat_s: float = HEARTBEAT_S
    # The Keras model the job's artefact was converted from, where its runs sit beside it:
    # recorded in each run (its group is the source's), and loaded by a layer probe.
    source: KerasSource | None = None

    @property
    def probes_layers(self) -> bool:
        return self.probe_memory_budget > 0

    def process_config(self) -> RunConfig:
        """A configuration of this job; its process-level knobs are those of every run, and
        its runtime's engine module and environment those of every run's runtime (LiteRT's
        four conversions share a child: each run still names its own)."""
        settings = {run.config.process_settings() for run in self.runs}
        if len(settings) != 1:
            raise ValueError("a job's runs must share their process-level settings")
        return self.runs[0].config

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "model_hash": self.model_hash,
            "trust_model": self.trust_model,
            "preprocessing": self.preprocessing.to_job_dict(),
            "trust_preprocess": self.trust_preprocess,
            "output": self.output.to_dict(),
            "images": [asdict(image) for image in self.images],
            "cache_root": self.cache_root,
            "runs": [run.to_dict() for run in self.runs],
            "probe_memory_budget": self.probe_memory_budget,
            "heartbeat_s": self.heartbeat_s,
            "source": (
                None if self.source is None else {**self.source.to_dict(), "path": self.source.path}
            ),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineJob:
        return cls(
            model_path=data["model_path"],
            model_hash=data["model_hash"],
            trust_model=bool(data["trust_model"]),
            preprocessing=Preprocessing.from_dict(data["preprocessing"]),
            output=OutputSelection.from_dict(data["output"]),
            images=tuple(ImageRef(**image) for image in data["images"]),
            cache_root=data["cache_root"],
            runs=tuple(PlannedRun.from_dict(run) for run in data["runs"]),
            probe_memory_budget=int(data.get("probe_memory_budget", 0)),
            trust_preprocess=bool(data.get("trust_preprocess", False)),
            heartbeat_s=float(data.get("heartbeat_s", HEARTBEAT_S)),
            source=KerasSource.from_dict(
                data.get("source"), str((data.get("source") or {}).get("path", ""))
            ),
        )


def heartbeat_for(timeout_s: float) -> float:
    """A child's heartbeat under a runner that kills it after ``timeout_s`` of silence: every
    :data:`HEARTBEAT_S`, or three times within a shorter deadline (``--timeout 10`` would
    otherwise kill a first compilation of 12 s that says so every 15 s)."""
    return max(0.5, min(HEARTBEAT_S, timeout_s / 3))
