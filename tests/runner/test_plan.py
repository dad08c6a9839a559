"""Planning: what is decoded before any child starts, and what a cache hit skips."""

import importlib
import shutil
from pathlib import Path

import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.runner import MatrixRunner, plan_matrix

pytestmark = pytest.mark.slow
planning = importlib.import_module(
    "segdiff_gui.runner.plan"
)  # the package exports a function of that name

CONFIGS = [RunConfig(batch=1), RunConfig(batch=2)]


@pytest.fixture
def decoded(monkeypatch):
    """The images planning decodes, in order (it still decodes them for real)."""
    paths = []
    real = planning.read_image

    def recording(path):
        paths.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(planning, "read_image", recording)
    return paths


def test_a_bad_image_fails_at_planning_before_any_child(models, small_images, cache, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n but nothing else")
    with pytest.raises(InputError, match="broken.png.*not a readable image"):
        plan_matrix(models / "tiny.keras", [*small_images, broken], CONFIGS, cache=cache)


def test_a_cache_hit_decodes_only_images_no_cached_run_was_made_from(
    models, small_images, cache, tmp_path, decoded
):
    model = models / "tiny.keras"
    first = plan_matrix(model, small_images[:2], CONFIGS, cache=cache)
    assert sorted(decoded) == ["small_0.png", "small_1.png"]  # nothing cached yet: all of them
    list(MatrixRunner(first, cache).run())
    decoded.clear()
    again = plan_matrix(model, small_images[:2], CONFIGS, cache=cache)
    assert again.jobs == () and decoded == []  # every run cached: its images were decoded then
    # A new image that no cached run was made from is decoded, and only that one; so is a
    # changed file under an old name (its bytes, hence its key, are new).
    changed = tmp_path / "small_1.png"
    shutil.copy(small_images[2], changed)
    plan_matrix(model, [small_images[0], changed, small_images[3]], CONFIGS, cache=cache)
    assert sorted(decoded) == ["small_1.png", "small_3.png"]
