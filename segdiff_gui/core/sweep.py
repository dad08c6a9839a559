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
from segdiff_gui.core.findings import plural
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.core.test_sets import SetCoverage

__all__ = [
    "ImageSummary",
    "Overlap",
    "SweepHints",
    "SweepSummary",
    "overlap",
    "summarise_image",
    "sweep_sentences",
]


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


_NO_EFFECT = Effect(0, 0.0, 0, 0, 0)


def summarise_alone(image: str, configuration: str, map_shape: tuple[int, ...]) -> ImageSummary:
    """The summary of an image whose one run has nothing to be compared with (no other run,
    no truth): what :func:`summarise_image` makes of it, without reading its map."""
    entry = ConfigurationOnImage(_NO_EFFECT, None)
    return ImageSummary(image, int(np.prod(map_shape[:2])), {configuration: entry})


def summarise_image(image: str, study: GroupAnalysis, truth: np.ndarray | None) -> ImageSummary:
    """Every configuration of ``study`` (one image) against its reference and the truth."""
    reference = study.reference
    by_configuration: dict[str, list[Any]] = {}
    for run in sorted(study.runs, key=lambda r: r.repeat):
        by_configuration.setdefault(run.configuration, []).append(run)
    multiclass = study.multiclass
    entries = {}
    for name, runs in by_configuration.items():
        others = [run for run in runs if run.key != reference.key]
        effects = [study.effect(run) for run in others]
        overlaps = None
        if truth is not None:
            overlaps = tuple(
                overlap(class_map(run.probabilities, study.cutoff), truth, multiclass)
                for run in runs
            )
        largest = Effect.largest(effects) if effects else _NO_EFFECT
        entries[name] = ConfigurationOnImage(largest, overlaps)
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


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


@dataclass
class SweepSummary:
    """Totals over a test set; :meth:`add` takes one image's summary at a time, and only its
    numbers are kept (a few per configuration), never its maps.

    Means of Dice and IoU compare like with like: a configuration's change from the reference
    is averaged over the images both have scores for (``delta_images``, said wherever the
    change is shown unless it is every image: :meth:`delta_text`), and its range over repeats
    uses only the repeats it has on every one of its images. A configuration that is missing
    on some images is *partial*; the test-set sentences leave it out.
    """

    reference: str
    cutoff: float
    multiclass: bool = False
    model: str = ""
    images: list[ImageSummary] = field(default_factory=list)
    without_reference: list[str] = field(default_factory=list)  # images left out
    # The test sets the images belong to, where their manifests are known (merged shards).
    coverage: list[SetCoverage] = field(default_factory=list)
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
            totals.truth_images += entry.overlaps is not None

    @property
    def incomplete(self) -> list[SetCoverage]:
        """The test sets of which some images are missing: never shown as whole."""
        return [coverage for coverage in self.coverage if not coverage.complete]

    @property
    def expected_images(self) -> int:
        """The images a whole sweep would have: its own, and those missing of its sets."""
        return len(self.images) + sum(c.size - c.present for c in self.incomplete)

    def images_text(self) -> str:
        """``12 images``, or ``5 of 12 images (incomplete)`` where shards are missing."""
        if not self.incomplete:
            return plural(len(self.images), "image")
        return f"{len(self.images):,} of {plural(self.expected_images, 'image')} (incomplete)"

    @property
    def configurations(self) -> list[str]:
        return list(self._totals)

    @property
    def has_truth(self) -> bool:
        return any(t.truth_images for t in self._totals.values())

    def _scores(self, name: str) -> list[tuple[Overlap, ...]]:
        found = []
        for image in self.images:
            entry = image.configurations.get(name)
            if entry is not None and entry.overlaps:
                found.append(entry.overlaps)
        return found

    def _shared(self, name: str) -> list[tuple[Overlap, Overlap]]:
        """Repeat 0's scores of this configuration and of the reference, on every image both
        have scores for: what their change is measured over."""
        pairs = []
        for image in self.images:
            ours, theirs = image.configurations.get(name), image.configurations.get(self.reference)
            if ours and theirs and ours.overlaps and theirs.overlaps:
                pairs.append((ours.overlaps[0], theirs.overlaps[0]))
        return pairs

    def _delta(self, shared: list[tuple[Overlap, Overlap]], score: str) -> float | None:
        """Mean over ``shared`` of (this configuration − the reference)."""
        return _mean([getattr(ours, score) - getattr(theirs, score) for ours, theirs in shared])

    def delta_text(self, row: dict[str, Any], score: str = "dice") -> str:
        """A row's change of mean Dice (``score="iou"``: IoU) from the reference as every front
        end shows it: ``-3.33e-01``, and ``over 1 of 4 images`` where the two do not share
        every image of the sweep; empty for the reference and where nothing is scored."""
        value = row[f"delta_mean_{score}"]
        if row["is_reference"] or value is None:
            return ""
        shown = f"{value:+.2e}"
        if row["delta_images"] == len(self.images):
            return shown
        return f"{shown} over {row['delta_images']:,} of {plural(len(self.images), 'image')}"

    def rows(self) -> list[dict[str, Any]]:
        """One row per configuration: totals over the set; with truth, its mean Dice/IoU
        (first repeat), per complete repeat, their range over repeats, and the change from the
        reference over the images both have (``delta_images`` of them)."""
        rows = []
        for name, totals in self._totals.items():
            scores = self._scores(name)
            shared = self._shared(name) if scores else []
            complete = min((len(s) for s in scores), default=0)
            dice = [float(np.mean([s[r].dice for s in scores])) for r in range(complete)]
            iou = [float(np.mean([s[r].iou for s in scores])) for r in range(complete)]
            row = {
                "configuration": name,
                "is_reference": name == self.reference,
                "partial": totals.images < len(self.images),
                **asdict(totals),
                "mean_dice": dice[0] if dice else None,
                "mean_iou": iou[0] if iou else None,
                "mean_dice_per_repeat": dice,
                "mean_iou_per_repeat": iou,
                "dice_repeat_range": (max(dice) - min(dice)) if len(dice) > 1 else None,
                "delta_mean_dice": self._delta(shared, "dice"),
                "delta_mean_iou": self._delta(shared, "iou"),
                "delta_images": len(shared),
            }
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "reference": self.reference,
            "without_reference": self.without_reference,
            "expected_images": self.expected_images,
            "test_sets": [coverage.to_dict() for coverage in self.coverage],
            "cutoff": self.cutoff,
            "kind": "softmax" if self.multiclass else "sigmoid",
            "configurations": self.rows(),
            "images": [summary.to_dict() for summary in self.images],
        }


@dataclass(frozen=True)
class SweepHints:
    """How a front end asks for ground truth and for repeats, in its own words."""

    masks: str
    repeats: str


def sweep_sentences(summary: SweepSummary, how: SweepHints) -> list[str]:
    """The test-set means in words; partial configurations are named, not compared. ``how``
    says, in the front end's words, how to measure what was not."""
    rows = summary.rows()
    lines = [coverage.sentence() for coverage in summary.incomplete]
    if summary.without_reference:
        missing = summary.without_reference
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        lines.append(
            f"Left out: {plural(len(missing), 'image')} without a run of {summary.reference} "
            f"({', '.join(missing[:5])}{more})."
        )
    partial = [
        f"{r['configuration']} ({plural(r['images'], 'image')})" for r in rows if r["partial"]
    ]
    if partial:
        lines.append(
            f"Partial (run on only some of the {len(summary.images)} images, so left out of "
            f"the sentences below): {', '.join(partial)}."
        )
    if not summary.has_truth:
        return [*lines, f"No ground truth given ({how.masks}): Dice and IoU not computed."]
    complete = [r for r in rows if not r["partial"]]
    with_truth = max((r["truth_images"] for r in complete), default=0)
    if with_truth < len(summary.images):
        lines.append(
            f"Ground truth found for {with_truth} of {len(summary.images)} images: Dice and "
            "IoU cover those only."
        )
    others = [r for r in complete if not r["is_reference"] and r["delta_mean_dice"] is not None]
    if others:
        top = max(others, key=lambda r: abs(r["delta_mean_dice"]))
        lines.append(
            f"The test-set mean Dice moves by at most {abs(top['delta_mean_dice']):.2e} from the "
            f"reference ({top['configuration']} against {summary.reference}: "
            f"{top['mean_dice']:.6f} vs {top['mean_dice'] - top['delta_mean_dice']:.6f})."
        )
    ranges = [r for r in complete if r["dice_repeat_range"] is not None]
    if ranges:
        top = max(ranges, key=lambda r: r["dice_repeat_range"])
        unchanged = top["dice_repeat_range"] == 0
        meaning = ": nondeterminism does not change the reported mean" if unchanged else ""
        lines.append(
            f"Over repeats, the mean Dice of one configuration varies by at most "
            f"{top['dice_repeat_range']:.2e} ({top['configuration']}){meaning}."
        )
    else:
        lines.append(f"Repeats not measured over the whole set ({how.repeats} to see them).")
    return lines
