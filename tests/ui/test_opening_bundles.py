"""Opening a bundle in the window: each of its groups offered, with a test set over them, and a
bundle of large maps shown run by run as it is read (fast: synthetic records)."""

from __future__ import annotations

from segdiff_gui.storage import ResultCache
from tests.factories import bundle_of, labelled_runs, sealed


def test_a_bundle_of_several_groups_offers_each_and_a_test_set(window, qtbot, tmp_path):
    """Only the first group opened, with no way to choose another, and the Test set
    tab was disabled."""
    first = labelled_runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0"])
    second = [
        sealed(r, target_hash="cd" * 32)
        for r in labelled_runs("m", "b.png", ["cpu b1 r0", "cpu b64 r0"], seed=1)
    ]
    bundle = bundle_of([*first, *second], tmp_path / "two.h5", ResultCache(tmp_path / "source"))
    window.open_paths([str(bundle)])
    panel = window.run_panel
    assert not panel.groups.isHidden()
    titles = [panel.groups.itemText(i) for i in range(panel.groups.count())]
    assert titles == ["m.keras on a.png", "m.keras on b.png"]
    assert {r.target_name for r in window.model.records.values()} == {"a.png"}
    panel.groups.setCurrentIndex(1)
    assert {r.target_name for r in window.model.records.values()} == {"b.png"}
    sweep = window.analysis.sweep_panel
    assert sweep.sweep_button.isEnabled()
    sweep.sweep_button.click()
    qtbot.waitUntil(lambda: sweep.summary is not None, timeout=20_000)
    assert sorted(image.image for image in sweep.summary.images) == ["a.png", "b.png"]


def test_a_large_bundle_shows_its_first_run_then_the_others_read_meanwhile(
    window, qtbot, tmp_path, monkeypatch
):
    """A bundle of large maps opens progressively; here every group is "large"."""
    from segdiff_gui.ui import session

    monkeypatch.setattr(session, "PROGRESSIVE_FROM_BYTES", 0)
    first = labelled_runs("m", "a.png", ["cpu b1 r0", "cpu b64 r0", "cpu b64 r1"])
    second = [
        sealed(r, target_hash="cd" * 32)
        for r in labelled_runs("m", "b.png", ["cpu b1 r0", "cpu b64 r0"], seed=1)
    ]
    bundle = bundle_of([*first, *second], tmp_path / "two.h5", ResultCache(tmp_path / "source"))
    with qtbot.waitSignal(window.sessions.reading_finished, timeout=30_000):
        window.open_paths([str(bundle)])
        assert [run.label for run in window.model.runs] == ["cpu b1 r0"]
        assert window.sessions.reading
        assert window.statusBar().currentMessage() == "reading 2 more runs of the bundle…"
    assert not window.sessions.reading
    assert window.statusBar().currentMessage() == "showing 3 runs of the bundle"
    assert [run.label for run in window.model.runs] == ["cpu b1 r0", "cpu b64 r0", "cpu b64 r1"]
    for run, record in zip(window.model.runs, first, strict=True):
        assert run.probabilities.tobytes() == record.probabilities.tobytes()
    assert window.model.study is not None and len(window.model.study.others) == 2
    # Another group chosen while one is read: what the first reader still sends is dropped.
    panel = window.run_panel
    panel.groups.setCurrentIndex(0)
    window.open_paths([str(bundle)])
    assert window.sessions.reading
    with qtbot.waitSignal(window.sessions.reading_finished, timeout=30_000):
        panel.groups.setCurrentIndex(1)
    qtbot.wait(200)  # the first reader's last messages, had it not been stopped
    assert {r.target_name for r in window.model.records.values()} == {"b.png"}
    assert len(window.model.runs) == 2
