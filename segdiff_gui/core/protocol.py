"""The protocol between the runner and its engine children, one typed message per JSON line:
a job's progress (what the runner yields to both front ends), a device probe's answer, and a
model inspection's answer. A child that cannot do what it was asked sends :class:`ChildFatal`,
whatever it was asked."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

__all__ = [
    "AllDone",
    "BatchProgress",
    "ChildFatal",
    "Message",
    "ModelAnswer",
    "ProbeAnswer",
    "PlanReady",
    "RunCached",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "decode_message",
    "skipped_line",
]


@dataclass(frozen=True)
class Message:
    event: ClassVar[str] = ""

    def to_json(self) -> str:
        # Every field holds JSON's own types already: no deep copy (a sweep says thousands).
        return json.dumps(
            {"event": self.event, **{f.name: getattr(self, f.name) for f in fields(self)}}
        )


@dataclass(frozen=True)
class PlanReady(Message):
    """The matrix is planned: ``total`` runs, of which ``cached`` need no inference;
    ``notices``: what the user should know before they run (one line each); ``skipped``:
    the configurations the model cannot take, left out while the others run, each its
    label and why (said as :func:`skipped_line` writes it)."""

    event: ClassVar[str] = "plan"
    total: int
    cached: int
    children: int
    notices: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()

    def skipped_lines(self) -> tuple[str, ...]:
        return tuple(skipped_line(label, why) for label, why in self.skipped)


def skipped_line(label: str, why: str) -> str:
    """A configuration left out, in one line: ``skipped cpu b1 fp64: model: precision …``."""
    return f"skipped {label}: {why}"


@dataclass(frozen=True)
class RunCached(Message):
    event: ClassVar[str] = "cached"
    key: str
    label: str


@dataclass(frozen=True)
class RunStarted(Message):
    event: ClassVar[str] = "started"
    key: str
    label: str


@dataclass(frozen=True)
class BatchProgress(Message):
    """Step ``step`` of ``steps`` of one run (build batch, prepare model, infer, write)."""

    event: ClassVar[str] = "progress"
    key: str
    step: int
    steps: int
    what: str


@dataclass(frozen=True)
class RunFinished(Message):
    """One run stored. ``written``: what the child stored (the file's identity and its
    attributes, JSON as the storage writes it), which the runner takes for the file instead
    of reading it back; the runner passes the message on without it."""

    event: ClassVar[str] = "finished"
    key: str
    label: str
    seconds: float
    device: str
    written: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunFailed(Message):
    """One run failed; ``detail`` carries the child's stderr tail when the child died.

    ``input_error`` marks failures caused by the input under this configuration (e.g. outputs
    that stop being probabilities in float16), as opposed to the machine (a crash, a missing
    GPU); when every run fails for the same input error, front ends report it as one.
    """

    event: ClassVar[str] = "failed"
    key: str
    label: str
    error: str
    detail: str = ""
    input_error: bool = False
    fix: str = ""  # the setting that would mend an input error (see InputError.fix)


@dataclass(frozen=True)
class ChildFatal(Message):
    """A child could not do any of its runs (bad model, bad image): an input error."""

    event: ClassVar[str] = "fatal"
    path: str
    problem: str
    detail: str = ""  # the child's traceback, shown with --debug
    fix: str = ""  # the setting that would mend it (see InputError.fix)

    @property
    def error(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass(frozen=True)
class AllDone(Message):
    event: ClassVar[str] = "done"
    finished: int
    cached: int
    failed: int
    cancelled: bool = False
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeAnswer(Message):
    """What ``engine probe`` found: the devices TensorFlow sees and the build's facts."""

    event: ClassVar[str] = "probe"
    devices: list[dict[str, Any]]
    facts: dict[str, Any]


@dataclass(frozen=True)
class ModelAnswer(Message):
    """What ``engine inspect`` found: what the model takes and gives."""

    event: ClassVar[str] = "model"
    format: str
    input_shape: list[int | None]
    outputs: list[dict[str, Any]]  # each {"name": ..., "shape": [...]}
    kinds: list[str]  # "sigmoid" or "softmax", per output
    dtype_policies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, **asdict(self)}


_TYPES: dict[str, type[Message]] = {
    cls.event: cls
    for cls in (
        PlanReady,
        RunCached,
        RunStarted,
        BatchProgress,
        RunFinished,
        RunFailed,
        ChildFatal,
        AllDone,
        ProbeAnswer,
        ModelAnswer,
    )
}


def decode_message(line: str) -> Message | None:
    """Parse one line from a child; anything that is not one of our messages gives ``None``."""
    try:
        data: Any = json.loads(line)
    except (ValueError, RecursionError):  # a line of nested brackets, too deep to parse
        return None
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        return None
    cls = _TYPES.get(data.pop("event"))
    if cls is None:
        return None
    try:
        return cls(**data)
    except TypeError:
        return None
