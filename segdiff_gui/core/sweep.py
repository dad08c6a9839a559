"""A whole test set: per image, how every configuration differs from the reference and how well
it agrees with the ground truth; over the set, the means and how much they move.

Images are added one at a time and their maps can be dropped at once: the accumulator keeps a
row of numbers per image and per configuration, never a map.

Overlap with the ground truth follows the usual definitions. A binary map scores its foreground
class (``p >= cutoff``) against the mask's nonzero pixels. A multi-class map scores every
foreground class (1 … C−1, class 0 being background) and averages over the classes present in
the prediction or the mask. When neither has any foreground, the prediction is perfect: Dice
and IoU are 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import class_map
from segdiff_gui.core.attribution import Effect
from segdiff_gui.core.study import Study

__all__ = ["ImageSummary", "Overlap", "SweepSummary", "overlap", "summarise_image"]


@dataclass(frozen=True)
class Overlap:
    dice: float
    iou: float


def overlap(predicted: np.ndarray, truth: np.ndarray, multiclass: bool) -> Overlap:
    """Dice and IoU of a class map against a ground-truth label map of the same size."""
    if predicted.shape != truth.shape:
        raise ValueError(f"prediction {predicted.shape} and truth {truth.shape} differ in size")
    if multiclass:
        classes = sorted(set(np.unique(predicted).tolist()) | set(np.unique(truth).tolist()))
        pairs = [(predicted == c, truth == c) for c in classes if c != 0]
    else:
        pairs = [(predicted != 0, truth != 0)]
    dices, ious = [], []
    for p, t in pairs:
        both = int(np.count_nonzero(p & t))
        either = int(np.count_nonzero(p | t))
        total = int(np.count_nonzero(p)) + int(np.count_nonzero(t))
        if either == 0:
            continue  # a class in neither: no information, left out of the mean
        dices.append(2 * both / total)
        ious.append(both / either)
    if not dices:
        return Overlap(1.0, 1.0)
    return Overlap(float(np.mean(dices)), float(np.mean(ious)))


@dataclass(frozen=True)
class ConfigurationOnImage:
    """One configuration on one image: the largest effect of any of its repeats against the
    reference, and each repeat's overlap with the truth (``None`` without a mask)."""

    effect: Effect
    overlaps: tuple[Overlap, ...] | None


@dataclass(frozen=True)
class ImageSummary:
    image: str
    pixels: int
    configurations: dict[str, ConfigurationOnImage]

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "pixels": self.pixels,
            "configurations": {
                name: {
                    **entry.effect.to_dict(),
                    "dice": [o.dice for o in entry.overlaps] if entry.overlaps else None,
                    "iou": [o.iou for o in entry.overlaps] if entry.overlaps else None,
                }
                for name, entry in self.configurations.items()
            },
        }


def summarise_image(image: str, study: Study, truth: np.ndarray | None) -> ImageSummary:
    """Every configuration of ``study`` (one image) against its reference and the truth."""
    reference = study.reference
    by_configuration: dict[str, list[Any]] = {}
    for run in sorted(study.runs, key=lambda r: r.repeat):
        by_configuration.setdefault(run.configuration, []).append(run)
    multiclass = study.multiclass
    entries = {}
    zero = Effect(0, 0.0, 0, 0, 0)
    for name, runs in by_configuration.items():
        others = [run for run in runs if run.key != reference.key]
        effects = [
            Effect.between(reference.probabilities, run.probabilities, study.cutoff)
            for run in others
        ]
        overlaps = None
        if truth is not None:
            overlaps = tuple(
                overlap(class_map(run.probabilities, study.cutoff), truth, multiclass)
                for run in runs
            )
        entries[name] = ConfigurationOnImage(Effect.largest(effects) if effects else zero, overlaps)
    pixels = int(np.prod(reference.probabilities.shape[:2]))
    return ImageSummary(image, pixels, entries)


@dataclass
class _Totals:
    images: int = 0
    images_with_flips: int = 0
    flips: int = 0
    at_risk: int = 0
    max_ulp: int = 0
    differing_pixels: int = 0
    truth_images: int = 0
    # Sums over images, one per repeat: the test-set mean of each repeat.
    dice_sums: list[float] = field(default_factory=list)
    iou_sums: list[float] = field(default_factory=list)


@dataclass
class SweepSummary:
    """Streaming totals over a test set; :meth:`add` takes one image's summary at a time."""

    reference: str
    cutoff: float
    multiclass: bool = False
    images: list[ImageSummary] = field(default_factory=list)
    _totals: dict[str, _Totals] = field(default_factory=dict)

    def add(self, summary: ImageSummary) -> None:
        self.images.append(summary)
        for name, entry in summary.configurations.items():
            totals = self._totals.setdefault(name, _Totals())
            totals.images += 1
            totals.flips += entry.effect.flips
            totals.images_with_flips += entry.effect.flips > 0
            totals.at_risk += entry.effect.at_risk
            totals.differing_pixels += entry.effect.differing_pixels
            totals.max_ulp = max(totals.max_ulp, entry.effect.max_ulp)
            if entry.overlaps is not None:
                totals.truth_images += 1
                for index, score in enumerate(entry.overlaps):
                    if index == len(totals.dice_sums):
                        totals.dice_sums.append(0.0)
                        totals.iou_sums.append(0.0)
                    totals.dice_sums[index] += score.dice
                    totals.iou_sums[index] += score.iou

    @property
    def configurations(self) -> list[str]:
        return list(self._totals)

    @property
    def has_truth(self) -> bool:
        return any(t.truth_images for t in self._totals.values())

    def _means(self, name: str, sums: Sequence[float]) -> list[float]:
        count = self._totals[name].truth_images
        return [total / count for total in sums] if count else []

    def rows(self) -> list[dict[str, Any]]:
        """One row per configuration: totals over the set, and its mean Dice/IoU (first
        repeat), their range over repeats, and the change from the reference's mean."""
        reference_dice = self._means(self.reference, self._totals[self.reference].dice_sums)
        reference_iou = self._means(self.reference, self._totals[self.reference].iou_sums)
        rows = []
        for name, totals in self._totals.items():
            dice = self._means(name, totals.dice_sums)
            iou = self._means(name, totals.iou_sums)
            row = {
                "configuration": name,
                "is_reference": name == self.reference,
                **{
                    key: value
                    for key, value in asdict(totals).items()
                    if key not in ("dice_sums", "iou_sums")
                },
                "mean_dice": dice[0] if dice else None,
                "mean_iou": iou[0] if iou else None,
                "mean_dice_per_repeat": dice,
                "mean_iou_per_repeat": iou,
                "dice_repeat_range": (max(dice) - min(dice)) if dice else None,
                "delta_mean_dice": (dice[0] - reference_dice[0])
                if dice and reference_dice
                else None,
                "delta_mean_iou": (iou[0] - reference_iou[0]) if iou and reference_iou else None,
            }
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "cutoff": self.cutoff,
            "kind": "softmax" if self.multiclass else "sigmoid",
            "configurations": self.rows(),
            "images": [summary.to_dict() for summary in self.images],
        }
