"""The engine tests' shared runs (tests/engine/demo_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import made_once
from tests.engine.demo_runs import IMAGES, SharedRuns, compute, shared_runs


@pytest.fixture(scope="session")
def demo_runtime_runs(
    demo: tuple[Path, list[Path]], tmp_path_factory: pytest.TempPathFactory
) -> SharedRuns:
    """The runs test_runtimes.py, test_exact.py and test_tf32_emulation.py read, computed
    once for the whole run (under pytest-xdist too)."""
    model, images = demo
    return shared_runs(
        made_once(tmp_path_factory, "demo-runtime-runs", lambda root: compute(model, images, root))
    )


@pytest.fixture(scope="session")
def demo4(demo: tuple[Path, list[Path]]) -> tuple[Path, list[Path]]:
    """The demo model on the shared runs' four images: enough for a batch of four, the set a
    full-int8 conversion calibrates on, and each child's work a quarter of the sixteen's."""
    model, images = demo
    return model, images[:IMAGES]
