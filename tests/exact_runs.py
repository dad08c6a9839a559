"""A study with an exact (float64) run, built in memory: crafted maps with known answers for
what every front end shows of "exact"."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.study import GroupAnalysis, StudyRun

CUT = 0.5
C32 = float(np.float32(CUT))
BELOW = float(np.nextafter(np.float32(CUT), np.float32(0)))


def exact_config() -> RunConfig:
    """precision=float64: the exact run's configuration."""
    return RunConfig(precision="float64")


def study_run(
    label: str, config: RunConfig, probabilities: np.ndarray, repeat: int = 0
) -> StudyRun:
    return StudyRun(f"key-{label}-{repeat}", f"{label} r{repeat}", config, repeat, probabilities)


def exact_values() -> np.ndarray:
    """20×20 exact values from 0.3 to 0.7, the first on the cutoff, the second a hair below."""
    values = np.linspace(0.3, 0.7, 400).reshape(20, 20)
    values[0, 0], values[0, 1] = C32, C32 - 1e-12
    return values


def bf16_study(cutoff: float = CUT) -> GroupAnalysis:
    """cpu (the exact values correctly rounded), bf16 (shifted by 3e-3: 3 pixels wrong where
    float32 decides, 1 where it cannot) and the exact run."""
    exact = exact_values()
    return GroupAnalysis(
        [
            study_run("cpu", RunConfig(), exact.astype(np.float32)),
            study_run(
                "bf16", RunConfig(precision="mixed_bfloat16"), (exact + 3e-3).astype(np.float32)
            ),
        ],
        cutoff=cutoff,
        exact=study_run("fp64", exact_config(), exact),
    )


def assert_exact_pixels(rows: list[dict[str, str]], exact: np.ndarray, cutoff: float) -> None:
    """Each line of a flipped-pixels CSV (read by ``csv.DictReader``) gives the exact map's
    value at its pixel whole (a float64 that reads back the same), the class it has at
    ``cutoff`` and whether float32 can decide it, recomputed here from ``exact`` (H×W, or
    H×W×1: a sigmoid map)."""
    values = exact[..., 0] if exact.ndim == 3 else exact
    c32 = np.float64(np.float32(cutoff))
    ulp = np.float64(np.spacing(np.float32(cutoff)))
    assert rows
    for row in rows:
        value = values[int(row["row"]), int(row["column"])]
        assert np.float64(row["exact value (float64)"]) == value
        assert row["exact class"] == str(int(value >= c32))
        assert row["float32 can decide"] == str(bool(abs(value - c32) > ulp))
