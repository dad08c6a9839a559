"""A user's own model in the window: settings chosen there (or given as the same flags as
``segdiff run``), fixes offered by the errors, and the very cache entries the CLI makes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.core.runtime_defaults import tensorflow_onednn_default
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here

pytestmark = pytest.mark.slow


@pytest.fixture
def photos(tmp_path):
    """An RGB, a gray and an RGBA photo, none of the model's 32×32 size but the gray one."""
    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(11)
    Image.fromarray(rng.integers(0, 255, (32, 32), dtype=np.uint8)).save(folder / "a_gray.png")
    Image.fromarray(rng.integers(0, 255, (36, 40, 3), dtype=np.uint8)).save(folder / "b_rgb.png")
    Image.fromarray(rng.integers(0, 255, (48, 48, 4), dtype=np.uint8)).save(folder / "c_rgba.png")
    return folder


def _wait_idle(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.worker is None, timeout=180_000)


def test_a_keras2_rgb_model_on_mixed_photos_is_fixed_in_the_window_as_the_cli_runs_it(
    window, qtbot, models, photos, tmp_path, capsys
):
    model = models / "rgb_tfkeras.h5"
    window.open_paths([str(model), str(photos)])
    panel = window.run_panel
    _wait_idle(qtbot, window)
    # The gray target needs colour conversion: said in the window, with the control to set.
    assert "needs RGB input (colour conversion) — in Model settings, colour: rgb" in (
        panel.problem.text()
    )
    assert "--" not in panel.problem.text()
    assert panel.fix_button.text() == "Set colour to rgb and run again"
    panel.fix_button.click()
    assert panel.settings.color.currentText() == "rgb"
    _wait_idle(qtbot, window)
    # Batch 64 fills with the other photos, of other sizes: resizing is the next fix.
    assert "resize: bilinear" in panel.problem.text()
    assert panel.fix_button.text() == "Set resize to bilinear and run again"
    panel.fix_button.click()
    _wait_idle(qtbot, window)
    assert panel.problem.isHidden(), panel.problem.text()
    assert panel.settings_section.text() == "Model settings: colour rgb, resize bilinear"
    shown = {run.label: run for run in window.model.runs}
    assert sorted(shown) == ["cpu b1 r0", "cpu b1 r1", "cpu b64 r0", "cpu b64 r1"]
    cache = window.session.cache
    # The CLI asked for the same is served from the window's cache entries...
    same = segdiff_here(
        capsys, "run", model, photos, "--color", "rgb", "--resize", "bilinear",
        "--cache", cache.root, "--json",
    )  # fmt: skip
    assert same.returncode == 0, same.stderr
    statuses = {run["label"]: run["status"] for run in json.loads(same.stdout)["runs"]}
    assert statuses == dict.fromkeys(shown, "cached")
    # ...and computing it afresh elsewhere gives the same bits.
    fresh = ResultCache(tmp_path / "cli-cache")
    again = segdiff_here(
        capsys,
        "run",
        model,
        photos,
        "--color",
        "rgb",
        "--resize",
        "bilinear",
        "--cache",
        fresh.root,
    )
    assert again.returncode == 0, again.stderr
    for record in fresh.records():
        ours = shown[record.label].probabilities
        assert fresh.read_run(record.key).probabilities.tobytes() == ours.tobytes()


def test_a_free_size_unet_is_fixed_by_the_windows_resize_button_not_refused_again(
    window, qtbot, models, tmp_path
):
    """A U-Net of free input size on photos of several sizes, one of a size
    it cannot take. The window's problem line named TensorFlow's raw concat error, or offered
    bilinear resizing and, clicked, failed the same way again. It names the image and the
    sizes the model takes, and its button's bilinear resizing runs every run."""
    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(12)
    Image.fromarray(rng.integers(0, 255, (33, 34, 3), dtype=np.uint8)).save(folder / "a_odd.png")
    Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(folder / "b_small.png")
    window.open_paths([str(models / "free_unet_tfkeras.h5"), str(folder)])
    panel = window.run_panel
    _wait_idle(qtbot, window)
    # Its batch of 64 with the smaller photo, too, says first the size it cannot take.
    assert "a_odd.png: is 33×34×3, a size this model cannot take" in panel.problem.text()
    assert "it takes 34×34 or 32×34 (sides a multiple of 2)" in panel.problem.text()
    assert "— in Model settings, resize: bilinear" in panel.problem.text()
    assert panel.fix_button.text() == "Set resize to bilinear and run again"
    panel.fix_button.click()
    _wait_idle(qtbot, window)
    assert panel.problem.isHidden(), panel.problem.text()
    assert window.model.runs and {run.probabilities.shape for run in window.model.runs} == {
        (34, 34)
    }


def test_a_savedmodel_opens_once_the_user_trusts_it_in_the_window(
    window, qtbot, models, small_images, fake_engine
):
    window.open_paths([str(models / "tiny_savedmodel"), *map(str, small_images[:2])])
    panel = window.run_panel
    qtbot.waitUntil(lambda: panel.fix_button.isVisible(), timeout=120_000)
    _wait_idle(qtbot, window)
    assert "TensorFlow SavedModel" in panel.problem.text()
    assert "tick “trust this model”" in panel.problem.text()
    # The runs' refusal is the model's facts: no TensorFlow child is asked the same again.
    assert panel.model_info.text() == "model refused (see below)"
    assert panel.fix_button.text() == "Trust this model and run again"
    assert panel.settings.trust_warning.isHidden()
    panel.fix_button.click()
    assert panel.settings.trust.isChecked() and not panel.settings.trust_warning.isHidden()
    assert "can read, change or send any of your files" in panel.settings.trust_warning.text()
    _wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: len(window.model.runs) == 4, timeout=60_000)
    assert panel.problem.isHidden(), panel.problem.text()


def test_gui_flags_name_the_same_settings_and_cache_entries_as_segdiff_run(
    window_for, models, small_images, tmp_path, capsys, fake_engine
):
    # The entry is the fake engine's: the key the window plans is the point, not the map.
    cache = tmp_path / "cache"
    options = ["--color", "gray", "--trust-model", "--config", "batch=1", "--repeats", "1"]
    result = segdiff_here(
        capsys, "run", models / "tiny.keras", small_images[0], *options, "--cache", cache
    )
    assert result.returncode == 0, result.stderr
    window = window_for(
        "--cache", cache, "--no-run", *options, models / "tiny.keras", small_images[0]
    )
    plan = window.session.plan
    assert len(plan.runs) == 1 and plan.cached == plan.runs  # served from the CLI's entry
    assert [run.label for run in window.model.runs] == ["cpu b1 r0"]
    settings = window.run_panel.settings
    assert settings.color.currentText() == "gray" and settings.trust.isChecked()
    assert window.run_panel.settings_section.text() == "Model settings: colour gray, trusted"


def test_a_sweeps_footer_counts_what_was_computed_and_what_was_cached(
    window, qtbot, models, small_images, fake_engine
):
    """The footer said "150 computed, 10 cached" when 140 were computed. The runs
    are the fake engine's: the footer's counts are the point (tests/cli/test_runtime_commands.py
    sweeps through real children)."""
    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.core.protocol import RunCached, RunFinished
    from segdiff_gui.runner.request import MatrixRequest
    from segdiff_gui.ui.session import MatrixSession

    cache = window.cache
    configs = (RunConfig(), RunConfig(batch=2))
    request = MatrixRequest(models / "tiny.keras", tuple(small_images), cache, configs, repeats=1)
    window.set_session(MatrixSession(request))
    window.start_runs()
    _wait_idle(qtbot, window)
    assert len(cache.records()) == 2  # the target's two runs
    messages = []
    window.analysis.sweep()
    window.worker.message.connect(messages.append)
    _wait_idle(qtbot, window)
    computed = sum(isinstance(m, RunFinished) for m in messages)
    cached = sum(isinstance(m, RunCached) for m in messages)
    assert (computed, cached) == (6, 2) and len(cache.records()) == 8
    assert window.run_panel.status.text() == "done: 6 computed, 2 cached, 0 failed"


def test_your_own_map_is_imported_and_reproduced_in_the_window(
    window, qtbot, models, small_images, tmp_path, fake_engine
):
    """File › Import maps… shows the map beside segdiff's runs, labelled imported
    and never the reference; Analysis › Reproduce your map… names the configuration."""
    model = models / "tiny_tfkeras.h5"
    window.open_paths([str(model), *map(str, small_images)])
    _wait_idle(qtbot, window)
    assert window.model.study.reference.label == "cpu b1 r0"
    mine_b1 = next(run for run in window.model.study.runs if run.label == "cpu b1 r0")
    np.save(tmp_path / "mine.npy", mine_b1.probabilities)
    window.your_maps.import_file(tmp_path / "mine.npy", "my script")
    qtbot.waitUntil(lambda: window.your_maps._worker is None, timeout=180_000)
    labels = [run.label for run in window.model.study.runs]
    assert "imported: my script r0" in labels, labels
    assert window.model.study.reference.label == "cpu b1 r0"  # never the imported map
    shown = [panel.title.whole for panel in window.grid.panels.values()]
    assert any(title.startswith("imported: my script") for title in shown), shown
    # The inspector says what each run computed with: read back, or stated for an import.
    window.model.selected_pixel = (3, 4)
    table = window.inspector.table
    tips = {table.item(i, 0).text(): table.item(i, 0).toolTip() for i in range(table.rowCount())}
    assert "imported from mine.npy (stated, not measured)" in tips["imported: my script r0"]
    onednn = "on" if tensorflow_onednn_default(os.environ) else "off"
    assert f"oneDNN {onednn}: TensorFlow's default on this CPU" in tips["cpu b1 r0 (reference)"]
    window.your_maps.reproduce_file(tmp_path / "mine.npy")
    qtbot.waitUntil(lambda: window.your_maps._worker is None, timeout=180_000)
    assert "Your map is cpu b1 bit for bit (the defaults)." in window.statusBar().currentMessage()
    window.your_maps.add_to_matrix("xla=on")  # the dialog's "Show it beside the others"
    assert any(config.xla for config in window.run_panel.editor.configs())
