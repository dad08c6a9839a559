"""What the window is looking at: a run request (model, images, matrix, settings, cache) or a
bundle opened read-only. Runs already cached are shown at once; the rest run in a worker.
Qt-free: the session controller drives these."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.protocol import Message, RunCached, RunFinished
from segdiff_gui.runner.early import RunsStartedEarly
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.plan import MatrixPlan
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.runner.sweeps import SweepSession
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache, UnreadableEntry
from segdiff_gui.storage.loading import RunsSource
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore
from segdiff_gui.ui.inspection import InspectionModel

__all__ = ["BundleSession", "MatrixSession", "Planner", "read_runs"]

# Plans on the worker thread and gives the runner: the window's matrix, a sweep over every
# image, or the configurations an attribution lacks (or the runs started before the window).
Planner = Callable[[], MatrixRunner | RunsStartedEarly]


@dataclass
class MatrixSession:
    """A run request: what the matrix editor and Model settings change, backed by a cache."""

    request: MatrixRequest
    truth: Path | None = None  # ground-truth masks for the test-set sweep
    plan: MatrixPlan | None = field(default=None, init=False)
    swept: SweepSession | None = field(default=None, init=False)  # the last sweep started
    _shown: frozenset[str] = field(default=frozenset(), init=False)
    # Maps imported in this window (File › Import maps…): shown beside the plan's runs of
    # their image and settings.
    imported: frozenset[str] = field(default=frozenset(), init=False)

    @property
    def cache(self) -> ResultCache:
        return self.request.cache

    @property
    def store(self) -> RunStore:
        return self.request.cache

    @property
    def model_path(self) -> Path:
        return self.request.model

    @property
    def images(self) -> tuple[Path, ...]:
        return self.request.images

    def _planned(self, plan: MatrixPlan) -> MatrixPlan:
        self.plan = plan
        self._shown = frozenset(run.key for run in plan.runs)
        return plan

    def plan_now(self, gpus: Sequence[str] = ()) -> MatrixPlan:
        """Plan without asking for devices (GUI thread): what is cached shows at once."""
        return self._planned(self.request.plan(gpus))

    def runner(self) -> MatrixRunner:
        """The whole request (worker thread): asks for GPUs when the matrix depends on them."""
        runner = self.request.start()
        self._planned(runner.plan)
        return runner

    def sweep_runner(self) -> MatrixRunner:
        """The same matrix on every image (worker thread), its masks checked first. The views
        keep showing the target: its runs are part of the sweep, the other images' runs only
        feed the summary."""
        gpus = self.request.devices() if self.request.needs_devices else []
        self.plan_now(gpus)
        sweep = SweepSession(self.cache, request=self.request, masks=self.truth)
        runner = sweep.start(gpus)
        self.swept = sweep
        return runner

    def planner_for(self, configs: Sequence[RunConfig]) -> Planner:
        """A planner for ``configs`` on the target (e.g. an attribution's missing runs), whose
        runs join the views as they finish."""

        def start() -> MatrixRunner:
            runner = self.request.with_configs(configs).start([])
            self._shown = self._shown | {run.key for run in runner.plan.runs}
            return runner

        return start

    def absorb(self, model: InspectionModel, message: Message) -> None:
        """A run of the image on show became available: show it."""
        if (
            isinstance(message, RunFinished | RunCached)
            and message.key in self._shown
            and self.cache.has(message.key)
        ):
            model.add_run(self.cache, self.cache.read_run(message.key, with_map=False))


# A bundle's group whose maps hold more than this opens progressively (four 8192² float32 maps
# are 1 GiB and take seconds to read; four 2048² maps, 64 MiB, a fraction of one).
PROGRESSIVE_FROM_BYTES = 256 * 2**20
MAP_ITEM_BYTES = 4  # maps are stored as float32


def read_runs(
    store: RunStore, records: Sequence[RunRecord]
) -> Iterator[tuple[RunRecord, np.ndarray | None, InputError | None]]:
    """Each record with its map, or with why it cannot be read, one after another (on a
    worker thread: nothing here touches the model or Qt)."""
    for record in records:
        try:
            yield record, store.read_run(record.key).probabilities, None
        except InputError as error:
            yield record, None, error


@dataclass
class BundleSession:
    """Results made elsewhere: inspect them without the model (read-only). A bundle may hold
    several model/image groups; one is shown at a time."""

    bundle: BundleReader
    # Runs of the bundle that could not be read (each names the file and what is wrong).
    damaged: list[UnreadableEntry] = field(default_factory=list)
    groups: list[list[RunRecord]] = field(default_factory=list)
    shown: int = 0
    # Every readable run (the exact runs, which no group holds, too), grouped by the loader.
    source: RunsSource | None = None

    @property
    def store(self) -> RunStore:
        return self.bundle

    def read(self) -> None:
        scan = self.bundle.scan()
        self.damaged = scan.damaged
        self.source = RunsSource(self.bundle, list(scan.records), str(self.bundle.path), [])
        self.groups = self.source.groups

    def titles(self) -> list[str]:
        return list(self.source.titles.values()) if self.source else []

    def show(self, model: InspectionModel, index: int = 0) -> list[RunRecord]:
        """Show group ``index``. Of a large group only the first run is read now, and the
        runs still to read are returned (:func:`read_runs` reads them, in the background, for
        :meth:`InspectionModel.add_read_runs`): its first map shows seconds before the last."""
        if not self.groups:
            self.read()
        if not 0 <= index < len(self.groups):
            return []
        self.shown = index
        assert self.source is not None
        chosen = self.source.chosen(self.groups[index])
        # The exact run beside the group's runs, not one of the views.
        group = [*chosen.records, *([chosen.exact] if chosen.exact else [])]
        mapped = sum(math.prod(record.map_shape) * MAP_ITEM_BYTES for record in group)
        if len(group) < 2 or mapped < PROGRESSIVE_FROM_BYTES:
            model.set_runs(self.bundle, group)
            return []
        model.set_runs(self.bundle, group[:1])
        return group[1:]

    @property
    def records(self) -> list[RunRecord]:
        return [record for group in self.groups for record in group]
