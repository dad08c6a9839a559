"""``segdiff-gui MODEL IMAGE`` starts its runs before Qt; the window shows them."""

import os
import subprocess
import sys
import time

import pytest

from segdiff_gui.storage.cache import ResultCache
from tests.conftest import engine_children

_GUI = [sys.executable, "-c", "import sys; from segdiff_gui.ui.app import main; sys.exit(main())"]
_ENV = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}


@pytest.mark.slow
def test_the_window_started_from_the_command_line_computes_its_runs(models, small_images, tmp_path):
    cache = tmp_path / "cache"
    command = [*_GUI, str(models / "tiny.keras"), str(small_images[0]), "--cache", str(cache),
               "--config", "batch=1", "--repeats", "2"]  # fmt: skip
    process = subprocess.Popen(command, env=_ENV, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while len(list(cache.glob("runs/*/*.h5"))) < 2:
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the window computed no runs"
            time.sleep(0.2)
        labels = sorted(record.label for record in ResultCache(cache).records())
        assert labels == ["cpu b1 r0", "cpu b1 r1"]
        # Done, so no child is left; the window still stands (it quits when the user says).
        deadline = time.monotonic() + 30
        while engine_children(process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not engine_children(process.pid) and process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_model_that_is_not_there_is_one_line_and_starts_nothing(small_images, tmp_path):
    missing = tmp_path / "gone.keras"
    result = subprocess.run(
        [*_GUI, str(missing), str(small_images[0]), "--cache", str(tmp_path / "cache")],
        env=_ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"segdiff-gui: {missing}"), result.stderr
    assert not list((tmp_path / "cache").glob("runs/*/*.h5"))
