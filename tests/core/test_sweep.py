"""Dice and IoU against ground truth, and a sweep's streaming totals."""

from __future__ import annotations

import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.core.sweep import (
    SweepHints,
    SweepSummary,
    overlap,
    summarise_image,
    sweep_sentences,
)


def test_binary_overlap_matches_the_textbook_formulas() -> None:
    predicted = np.array([[1, 1, 0, 0], [1, 0, 0, 0]])
    truth = np.array([[1, 0, 0, 0], [1, 1, 1, 0]])
    scores = overlap(predicted, truth, multiclass=False)
    # |P∩T| = 2, |P| = 3, |T| = 4, |P∪T| = 5
    assert scores.dice == pytest.approx(2 * 2 / 7)
    assert scores.iou == pytest.approx(2 / 5)


def test_multiclass_overlap_averages_the_foreground_classes_present() -> None:
    predicted = np.array([[0, 1, 1, 2], [0, 0, 2, 2]])
    truth = np.array([[0, 1, 2, 2], [0, 0, 2, 2]])
    scores = overlap(predicted, truth, multiclass=True)
    dice_1, dice_2 = 2 * 1 / 3, 2 * 3 / 7
    iou_1, iou_2 = 1 / 2, 3 / 4
    assert scores.dice == pytest.approx((dice_1 + dice_2) / 2)
    assert scores.iou == pytest.approx((iou_1 + iou_2) / 2)


def test_nothing_predicted_and_nothing_there_is_perfect() -> None:
    empty = np.zeros((3, 3), dtype=int)
    assert overlap(empty, empty, multiclass=False).dice == 1.0
    assert overlap(empty, np.ones((3, 3), dtype=int), multiclass=False).dice == 0.0


def _study(values: dict[str, list[np.ndarray]]) -> GroupAnalysis:
    runs = []
    for label, maps in values.items():
        config = RunConfig(batch=int(label.split("b")[1]))
        for repeat, probabilities in enumerate(maps):
            runs.append(
                StudyRun(f"{label}{repeat}", f"{label} r{repeat}", config, repeat, probabilities)
            )
    return GroupAnalysis(runs, cutoff=0.5)


def test_sweep_totals_and_mean_dice_change() -> None:
    truth = np.array([[1, 1], [0, 0]])
    exact = np.array([[0.9, 0.8], [0.1, 0.2]], dtype=np.float32)
    off_by_one = np.array([[0.9, 0.8], [0.6, 0.2]], dtype=np.float32)  # one extra pixel
    summary = SweepSummary(reference="cpu b1", cutoff=0.5)
    summary.add(
        summarise_image(
            "a.png", _study({"cpu b1": [exact, exact], "cpu b8": [exact, off_by_one]}), truth
        )
    )
    summary.add(
        summarise_image(
            "b.png", _study({"cpu b1": [exact, exact], "cpu b8": [exact, exact]}), truth
        )
    )
    rows = {row["configuration"]: row for row in summary.rows()}
    assert rows["cpu b1"]["mean_dice"] == 1.0 and rows["cpu b1"]["delta_mean_dice"] == 0.0
    # cpu b8: repeat 0 is exact everywhere; repeat 1 misses on a.png (Dice 0.8).
    assert rows["cpu b8"]["mean_dice_per_repeat"] == pytest.approx([1.0, 0.9])
    assert rows["cpu b8"]["dice_repeat_range"] == pytest.approx(0.1)
    assert rows["cpu b8"]["flips"] == 1 and rows["cpu b8"]["images_with_flips"] == 1
    assert rows["cpu b8"]["images"] == 2
    assert summary.images[0].configurations["cpu b8"].effect.flips == 1


def test_missing_repeats_and_partial_configurations_compare_like_with_like() -> None:
    """One image with two repeats and extra configurations among images with one repeat (what
    a demo run followed by a sweep leaves in a cache) must not look like nondeterminism."""
    truth = np.array([[1, 1], [0, 0]])
    exact = np.array([[0.9, 0.8], [0.1, 0.2]], dtype=np.float32)
    worse = np.array([[0.9, 0.2], [0.1, 0.2]], dtype=np.float32)  # Dice 2/3
    summary = SweepSummary(reference="cpu b1", cutoff=0.5)
    summary.add(
        summarise_image(
            "a.png", _study({"cpu b1": [exact, exact], "cpu b8": [worse, worse]}), truth
        )
    )
    for name in ("b.png", "c.png"):
        summary.add(summarise_image(name, _study({"cpu b1": [exact]}), truth))
    rows = {row["configuration"]: row for row in summary.rows()}
    reference, partial = rows["cpu b1"], rows["cpu b8"]
    assert reference["mean_dice_per_repeat"] == [1.0]  # only repeat 0 is on every image
    assert reference["dice_repeat_range"] is None and not reference["partial"]
    assert partial["partial"] and partial["images"] == 1
    # Against the reference on the one image both have, not against the reference's mean.
    assert partial["delta_mean_dice"] == pytest.approx(2 / 3 - 1)
    assert partial["dice_repeat_range"] == 0.0


def test_a_sweep_csv_writes_names_a_spreadsheet_would_run_as_text(tmp_path) -> None:
    """An image named ``=HYPERLINK(…)`` reached the CSV raw, and a
    spreadsheet ran it. A text cell that begins a formula gets a leading apostrophe (OWASP);
    numbers, negative ones too, stay numbers."""
    import csv

    from segdiff_gui.io.tables import spreadsheet_cell, write_sweep_csv

    exact = np.array([[0.9, 0.8], [0.1, 0.2]], dtype=np.float32)
    summary = SweepSummary(reference="cpu b1", cutoff=0.5)
    names = ['=HYPERLINK("http://x","y").png', "+1.png", "-cmd.png", "@sum.png", "\tt.png"]
    for name in names:
        summary.add(summarise_image(name, _study({"cpu b1": [exact], "cpu b8": [exact]}), None))
    path = tmp_path / "sweep.csv"
    write_sweep_csv(path, summary)
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    written = {row[0] for row in rows[1:]}
    assert written == {"'" + name for name in names}
    assert spreadsheet_cell("-0.5") == "-0.5" and spreadsheet_cell(-3) == -3
    assert spreadsheet_cell("cpu b1") == "cpu b1"


def test_a_partial_configuration_s_change_says_how_many_images_it_is_over() -> None:
    """A configuration run on 1 of 4 images showed "Δ Dice +0.00" beside a
    mean Dice other than the reference's (its one image against the reference's four). The
    change is over the images both have, and says how many that is."""
    truth = np.array([[1, 1], [0, 0]])
    exact = np.array([[0.9, 0.8], [0.1, 0.2]], dtype=np.float32)  # Dice 1
    worse = np.array([[0.9, 0.2], [0.1, 0.2]], dtype=np.float32)  # Dice 2/3
    summary = SweepSummary(reference="cpu b1", cutoff=0.5)
    summary.add(summarise_image("a.png", _study({"cpu b1": [exact], "cpu b8": [exact]}), truth))
    for name in ("b.png", "c.png", "d.png"):
        summary.add(summarise_image(name, _study({"cpu b1": [worse], "cpu b64": [worse]}), truth))
    rows = {row["configuration"]: row for row in summary.rows()}
    partial, reference, most = rows["cpu b8"], rows["cpu b1"], rows["cpu b64"]
    assert partial["mean_dice"] == 1.0 and reference["mean_dice"] == pytest.approx(0.75)
    assert partial["delta_mean_dice"] == 0.0 and partial["delta_images"] == 1
    assert summary.delta_text(partial) == "+0.00e+00 over 1 of 4 images"
    assert summary.delta_text(most, "iou") == "+0.00e+00 over 3 of 4 images"
    assert reference["delta_images"] == 4 and summary.delta_text(reference) == ""
    sentences = " ".join(sweep_sentences(summary, SweepHints("masks", "repeats")))
    assert "so left out of the sentences below): cpu b8 (1 image), cpu b64 (3 images)." in (
        sentences
    )
