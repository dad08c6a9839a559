"""What the window is looking at, without Qt: the session (a run request, or a bundle opened
read-only), the request as it is edited, whether runs are in flight, and what the session can
do now, asked here rather than of the session's type.

``SessionModel`` is an evented dataclass (psygnal), as :class:`InspectionModel` is: ``session``,
``request`` and ``running`` each have an event of the same name that a write emits, with the
new and the old value, when the value changes. The request is the matrix session's (None for a
bundle): a write of it is the session's request from then on (what it plans and runs), and the
matrix editor follows it. A configuration added elsewhere (a diagnosis's "run them", a
reproduction's match) is added to the request here, not written into the editor's text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from psygnal import SignalGroupDescriptor

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.knobs import KNOBS, KnobRegistry
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.ui.session import BundleSession, MatrixSession

__all__ = ["SessionModel", "bundle_of", "matrix_of", "spec_configs"]

Session = MatrixSession | BundleSession


def matrix_of(session: Session | None) -> MatrixSession | None:
    """The session, where it is a run request (the model is at hand: runs can be computed)."""
    return session if isinstance(session, MatrixSession) else None


def bundle_of(session: Session | None) -> BundleSession | None:
    """The session, where it is a bundle opened read-only (maps, not the model)."""
    return session if isinstance(session, BundleSession) else None


def spec_configs(
    spec: str, devices: Sequence[str], base: RunConfig | None = None, knobs: KnobRegistry = KNOBS
) -> list[RunConfig]:
    """The configurations a ``key=value`` line names: ``base`` with its values, on each of
    ``devices`` unless it names one. A line that cannot be read raises ``ConfigError``."""
    values = knobs.parse(spec)
    base = base if base is not None else RunConfig()
    on = [values.pop("device")] if "device" in values else list(devices)
    return [replace(base, device=device, **values) for device in on]


def _never_equal(_new: object, _old: object) -> bool:
    return False


@dataclass(eq=False)
class SessionModel:
    """The window's session; see the module's docstring. Fields are written as attributes
    (``state.session = MatrixSession(request)``) and heard of through ``state.events``."""

    # The matrix session's request (None for a bundle, or none): written with the session.
    request: MatrixRequest | None = field(default=None, init=False)
    session: Session | None = None
    running: bool = False  # runs of the session are in flight (a worker drives them)
    # The GPUs known without asking a child (the remembered device probe): the devices of the
    # default matrix, which a request with no configurations of its own runs.
    gpus: tuple[str, ...] = ()

    # A session written is news even where it is the one on show: the window shows it anew.
    events: ClassVar[SignalGroupDescriptor] = SignalGroupDescriptor(
        equality_operators={"session": _never_equal}
    )

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "session":  # a new session brings its request (its event comes first)
            matrix = matrix_of(value)
            self.request = matrix.request if matrix is not None else None
        elif name == "request" and value is not None:
            matrix = matrix_of(getattr(self, "session", None))
            if matrix is not None:
                matrix.request = value  # what the session plans and runs from now on

    # what the session can do --------------------------------------------------------------------
    @property
    def matrix(self) -> MatrixSession | None:
        """The run request on show: its model is at hand (runs, layer probes, your maps)."""
        return matrix_of(self.session)

    @property
    def bundle(self) -> BundleSession | None:
        """The bundle on show: read-only, its maps only."""
        return bundle_of(self.session)

    @property
    def editable(self) -> MatrixSession | None:
        """The run request, where it can change and run now: none of its runs in flight."""
        return None if self.running else self.matrix

    # the configurations -----------------------------------------------------------------------
    @property
    def configurations(self) -> list[RunConfig]:
        """The request's matrix: its own configurations, or the default one on the known
        devices (empty without a request)."""
        request = self.request
        return request.configurations(self.gpus) if request is not None else []

    def add_configs(self, specs: Sequence[str]) -> bool:
        """Add the configurations of ``specs`` (``key=value`` lines, each on every device of
        the matrix unless it names one) to the request's; whether any is new. A line that
        cannot be read raises ``ConfigError`` and nothing is added."""
        request = self.request
        if request is None:
            return False
        configs = self.configurations
        devices = list(dict.fromkeys(config.device for config in configs)) or ["cpu"]
        added = [
            config for spec in specs for config in spec_configs(spec, devices, knobs=request.knobs)
        ]
        joined = tuple(dict.fromkeys([*configs, *added]))
        if request.configs and joined == request.configs:
            return False
        self.request = replace(request, configs=joined)
        return True
