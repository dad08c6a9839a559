"""What a layer probe uses of the child that runs it: a narrow view of the job runner
(worker.JobRunner fits it), so that the probes never import the run loop that calls them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.core.job import EngineJob, PlannedRun
    from segdiff_gui.engine.artefact_model import LoadedArtefact
    from segdiff_gui.engine.backends.base import Backend
    from segdiff_gui.engine.models import LoadedModel
    from segdiff_gui.engine.protocol import Channel
    from segdiff_gui.storage.cache import ResultCache
    from segdiff_gui.storage.records import RunRecord

__all__ = ["ProbeContext"]


class ProbeContext(Protocol):
    """The job, its backend, cache and channel, the model as loaded (and on each device), the
    output the map is made of, the batch a run computes, and the run itself (its plain map,
    where the cache has none to check the probe on)."""

    job: EngineJob
    backend: Backend
    cache: ResultCache
    channel: Channel
    model: LoadedModel | LoadedArtefact
    output_index: int

    def check_device(self, config: RunConfig) -> str: ...

    def model_on(self, device: str) -> LoadedModel | LoadedArtefact: ...

    def batch_for(self, run: PlannedRun) -> np.ndarray: ...

    def execute(self, run: PlannedRun) -> RunRecord: ...
