"""Attribution from stored runs: which configurations it needs, and the measurement itself."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from segdiff_gui.core.attribution import Attribution, AttributionPlan, attribute
from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import RunStore

__all__ = ["measure_attribution"]


def measure_attribution(
    store: RunStore,
    records: Sequence[RunRecord],
    plan: AttributionPlan,
    cutoff: float,
    first: Sequence[str] = (),
) -> Attribution:
    """Measure ``plan`` on ``records`` (one comparable group: same model, image, preprocessing).
    Only this machine's runs count (a run merged from another host is another machine, not a
    configuration); a configuration without runs is reported as not measured. Each
    configuration is represented by its first repeat, or by the run of ``first`` (keys) that
    has it, so that two runs a person named are the ones compared."""
    by_config: dict[RunConfig, list[RunRecord]] = {}
    for record in records:
        if "merged_from_key" in record.provenance:
            continue
        by_config.setdefault(record.run_config, []).append(record)
    loaded: dict[RunConfig, list[np.ndarray]] = {}

    def maps_of(config: RunConfig) -> list[np.ndarray]:
        if config not in loaded:
            runs = sorted(by_config.get(config, []), key=lambda r: (r.key not in first, r.repeat))
            maps = [store.read_run(r.key).probabilities for r in runs]
            loaded[config] = [m for m in maps if m is not None]
        return loaded[config]

    return attribute(plan, maps_of, cutoff)
