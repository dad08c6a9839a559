"""What the window is looking at: a planned matrix (model, images, configurations, cache) or a
bundle opened read-only. Runs already cached are shown at once; the rest run in a worker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.progress import Message, RunCached, RunFinished
from segdiff_gui.runner.devices import gpu_names, probe_devices
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import MatrixPlan, plan_matrix
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.studies import RunStore, comparable_groups
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["BundleSession", "MatrixSession"]


@dataclass
class MatrixSession:
    """A model on images under configurations, backed by a cache."""

    model_path: Path
    images: list[Path]
    cache: ResultCache
    # The matrix for the GPUs present: the CPU part is planned (and shown) before any probe.
    configs_for: Callable[[list[str]], list[RunConfig]]
    repeats: int = 2
    target: str | None = None  # an image's name; None: the first
    plan: MatrixPlan | None = field(default=None, init=False)

    @property
    def store(self) -> RunStore:
        return self.cache

    def plan_now(self, gpus: Sequence[str] = ()) -> MatrixPlan:
        self.plan = plan_matrix(
            self.model_path,
            self.images,
            self.configs_for(list(gpus)),
            cache=self.cache,
            repeats=self.repeats,
            target=self.target,
        )
        return self.plan

    def plan_with_devices(self) -> tuple[MatrixPlan, MatrixRunner]:
        """Called on the worker thread: asks for GPUs (a child), then plans the full matrix."""
        plan = self.plan_now(gpu_names(probe_devices(self.cache.root)))
        return plan, MatrixRunner(plan, self.cache)

    def absorb(self, model: InspectionModel, message: Message) -> None:
        """A run became available: show it."""
        if isinstance(message, RunFinished | RunCached) and self.cache.has(message.key):
            model.add_run(self.cache, self.cache.read_run(message.key, with_map=False))


@dataclass
class BundleSession:
    """Results made elsewhere: inspect them without the model (read-only)."""

    bundle: BundleReader

    @property
    def store(self) -> RunStore:
        return self.bundle

    def show(self, model: InspectionModel) -> int:
        groups = comparable_groups(self.bundle.records())
        if groups:
            model.set_runs(self.bundle, groups[0])
        return len(groups)
