"""How fast the analysis answers on 4 maps of 2048×2048 float32 (a reference and 3 others).

Run: ``python -m tests.benchmarks.bench_analysis``. Prints the median of several timings for the
things the GUI recomputes while a user drags the cutoff or switches runs: the flip mask at one
cutoff, the whole flips-vs-cutoff curve, and the summary of one run against the reference;
then the full study (all rows, repeat verdicts, at-risk pixels) and the pairwise matrix.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from segdiff_gui.core.analysis import compare_maps, flip_mask
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.cutoff_curve import flip_curve
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from tests.benchmarks.synthetic import maps

SIZE = 2048


def median_ms(action: Callable[[], object], repeats: int = 5) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def show(what: str, milliseconds: float) -> None:
    print(f"{what:<44}{milliseconds:9.3f} ms")


def main() -> None:
    reference, *others = maps(SIZE)
    print(
        f"4 maps of {SIZE}×{SIZE} float32 ({reference.nbytes / 2**20:.0f} MiB each); "
        "median of 5 runs"
    )
    other = others[1]
    show("flip mask at one cutoff (1 pair)", median_ms(lambda: flip_mask(reference, other, 0.55)))
    show("flips-vs-cutoff curve, 1001 cutoffs", median_ms(lambda: flip_curve(reference, other)))
    curve = flip_curve(reference, other)
    show("  then any cutoff from that curve", median_ms(lambda: curve.at(0.55), 50))
    show(
        "summary of 1 run against the reference",
        median_ms(lambda: compare_maps(reference, other, 0.55)),
    )
    runs = [
        StudyRun(f"k{i}", f"run {i}", RunConfig(batch=1 + i), 0, m)
        for i, m in enumerate([reference, *others])
    ]

    def full_study() -> None:
        study = GroupAnalysis(runs, cutoff=0.55)
        study.rows()
        study.verdicts  # noqa: B018 - computing it is the point
        study.at_risk  # noqa: B018

    show("full study (3 rows, verdicts, at-risk)", median_ms(full_study, 3))
    show("pairwise matrix (6 pairs)", median_ms(lambda: GroupAnalysis(runs).pairwise(), 3))
    for row in GroupAnalysis(runs, cutoff=0.55).rows():
        print(
            f"  {row['label']}: {row['differing_pixels']:,} differing pixels, max "
            f"{row['max_ulp']:,} ULP, {row['flips']:,} flips at 0.55"
        )


if __name__ == "__main__":
    main()
