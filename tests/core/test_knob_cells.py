"""Every knob × every runtime: each cell is refused before any child in one line, or
a real engine test runs it and shows it honoured (tests/engine/knob_cells.py)."""

from __future__ import annotations

import pytest

from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtimes import RUNTIMES
from tests.engine import (
    test_artefacts,
    test_converted_runtimes,
    test_exact,
    test_knobs,
    test_runtimes,
    test_tf32_emulation,
    test_tf_keras,
)
from tests.engine.knob_cells import (
    BY_CONSTRUCTION,
    NEEDS_GPU,
    RUN_LOOPS_OWN,
    SAMPLES,
    cells,
    moved,
    shown,
)

REAL_SPECS = [
    *test_knobs.SPECS.values(),
    *test_knobs.FRESH_SPECS,
    *test_runtimes.SPECS.values(),
    *test_runtimes.HINTS.values(),
    *test_converted_runtimes.SPECS.values(),
    *test_artefacts.SPECS.values(),
    *test_tf32_emulation.SPECS.values(),
    *test_exact.SPECS.values(),
    *test_tf_keras.SPECS.values(),
]


def test_every_knob_has_samples_and_every_runtime_its_cells():
    assert set(SAMPLES) == {knob.name for knob in KNOBS} - {"runtime"}
    assert {cell.runtime for cell in cells()} == set(RUNTIMES)


@pytest.mark.parametrize("cell", list(cells()), ids=lambda cell: f"{cell.runtime}:{cell.spec}")
def test_each_cell_is_refused_in_one_line_or_shown_honoured_by_a_real_test(cell):
    try:
        config = cell.config
    except ConfigError as error:
        said = str(error)
        assert "\n" not in said and RUNTIMES[cell.runtime].title in said + cell.knob, said
        return
    real = shown(REAL_SPECS)
    for knob, value in moved(config).items():
        if knob in NEEDS_GPU:
            continue  # on a GPU: tools/gpu_check.sh
        if knob in RUN_LOOPS_OWN:
            assert ("tensorflow", knob, value) in real, (knob, value)
            continue
        assert (cell.runtime, knob, value) in real or (cell.runtime, knob, value) in (
            BY_CONSTRUCTION
        ), f"{cell.runtime}: {knob}={value!r} is accepted, and no real test shows it honoured"
