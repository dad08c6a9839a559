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
from segdiff_gui.storage.cache import ResultCache, UnreadableEntry
from segdiff_gui.storage.studies import RunStore, comparable_groups
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["BundleSession", "MatrixSession", "Planner"]

# Plans a matrix and gives its runner, on the worker thread: the window's matrix, a sweep over
# every image, or the configurations an attribution lacks.
Planner = Callable[[], tuple[MatrixPlan, MatrixRunner]]


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
    truth: Path | None = None  # ground-truth masks for the test-set sweep
    plan: MatrixPlan | None = field(default=None, init=False)
    sweep_plan: MatrixPlan | None = field(default=None, init=False)
    _shown: frozenset[str] = field(default=frozenset(), init=False)

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
        self._shown = frozenset(run.key for run in self.plan.runs)
        return self.plan

    def plan_with_devices(self) -> tuple[MatrixPlan, MatrixRunner]:
        """Called on the worker thread: asks for GPUs (a child), then plans the full matrix."""
        plan = self.plan_now(gpu_names(probe_devices(self.cache.root)))
        return plan, MatrixRunner(plan, self.cache)

    def plan_sweep_with_devices(self) -> tuple[MatrixPlan, MatrixRunner]:
        """The same matrix on every image (worker thread). The views keep showing the target:
        its runs are part of the sweep, the other images' runs only feed the summary."""
        gpus = gpu_names(probe_devices(self.cache.root))
        configs = self.configs_for(list(gpus))
        self.plan_now(gpus)
        plan = plan_matrix(
            self.model_path, self.images, configs, cache=self.cache, repeats=self.repeats,
            sweep=True,
        )  # fmt: skip
        self.sweep_plan = plan
        return plan, MatrixRunner(plan, self.cache)

    def planner_for(
        self, configs: Sequence[RunConfig]
    ) -> Callable[[], tuple[MatrixPlan, MatrixRunner]]:
        """A planner for ``configs`` on the target (e.g. an attribution's missing runs), whose
        runs join the views as they finish."""

        def plan() -> tuple[MatrixPlan, MatrixRunner]:
            extra = plan_matrix(
                self.model_path, self.images, configs, cache=self.cache, repeats=self.repeats,
                target=self.target,
            )  # fmt: skip
            self._shown = self._shown | {run.key for run in extra.runs}
            return extra, MatrixRunner(extra, self.cache)

        return plan

    def absorb(self, model: InspectionModel, message: Message) -> None:
        """A run of the image on show became available: show it."""
        if (
            isinstance(message, RunFinished | RunCached)
            and message.key in self._shown
            and self.cache.has(message.key)
        ):
            model.add_run(self.cache, self.cache.read_run(message.key, with_map=False))


@dataclass
class BundleSession:
    """Results made elsewhere: inspect them without the model (read-only)."""

    bundle: BundleReader
    # Runs of the bundle that could not be read (each names the file and what is wrong).
    damaged: list[UnreadableEntry] = field(default_factory=list)

    @property
    def store(self) -> RunStore:
        return self.bundle

    def show(self, model: InspectionModel) -> int:
        scan = self.bundle.scan()
        self.damaged = scan.damaged
        groups = comparable_groups(scan.records)
        if groups:
            model.set_runs(self.bundle, groups[0])
        return len(groups)
