"""The analysis of one comparable group (:class:`GroupAnalysis`): all runs of one model on one
image, against a reference run, and beside it the exact run; what every front end shows (CLI
tables, reports, the CI gate, the GUI's statistics panel; the API's ``Study`` holds one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from segdiff_gui.core.analysis import (
    MapComparison,
    binary_classes_into,
    class_map,
    compare_maps,
    flip_mask,
    is_multiclass,
    row_blocks,
)
from segdiff_gui.core.attribution import Effect
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.cutoff_curve import FlipCurve, flip_curve
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.exact import (
    ExactDecisions,
    ExactError,
    ExactSummary,
    FlipSides,
    exact_decisions,
    exact_error,
    flip_sides,
    right_mask,
)
from segdiff_gui.core.floatfmt import format_float32
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.pages import empty_in_ordinary_pages
from segdiff_gui.core.parallel import for_each_core, thread_map
from segdiff_gui.core.spread import RepeatVerdict, at_risk_mask, observed_margin, repeat_verdict

__all__ = ["GroupAnalysis", "StudyRun", "default_reference", "reference_rank"]


@dataclass(frozen=True)
class StudyRun:
    key: str
    label: str
    config: RunConfig
    repeat: int
    probabilities: np.ndarray
    machine: str = ""  # the host that computed it, where known: runs of two hosts are no repeats
    # Where it came from when it was merged from a bundle (a bundle's file name), else "": such
    # a run is never taken as the reference while this machine has one of its own.
    merged_from: str = ""
    # What makes a run another model than its configuration says: a full-int8 run's
    # calibration set (its tag). Runs calibrated on other images are never repeats.
    variant: str = ""
    # What its batch held (storage/records.batch_id): runs whose batches held other images,
    # or the same in another order, are never repeats. "" where unknown.
    batch: str = ""
    # A map brought in from the user's own pipeline (segdiff import): compared like any run,
    # never a repeat (its variant is its map's digest) and never the default reference.
    imported: bool = False
    # oneDNN as it was in effect in the run's process (its provenance), where recorded.
    onednn: bool | None = None
    # The artefact's file name, for a run of the user's own artefact beside its Keras source
    # (the study is the source's): another model than its configuration says, said apart.
    artefact: str = ""

    @property
    def identity(self) -> tuple[RunConfig, str, str, str]:
        """What makes runs repeats of one configuration: the configuration, the machine (a
        run of another host is never a repeat of a local one), the variant and the batch's
        content. A value, not a label."""
        return (self.config, self.machine, self.variant, self.batch)

    @property
    def configuration(self) -> str:
        """The label without its repeat, for display: ``cpu b64`` (``server: cpu b64`` for a
        run kept beside this machine's)."""
        return configuration_name(self.label, self.repeat)


def configuration_name(label: str, repeat: int) -> str:
    """A run's label without its repeat: the configuration it names (``cpu b64``)."""
    return label.removesuffix(f" r{repeat}")


def reference_rank(
    config: RunConfig, *, imported: bool, artefact: bool, merged: bool
) -> tuple[bool, bool, bool, int]:
    """How a run ranks as the default reference, lowest first (the one rule of a study's and
    a sweep's): a run of segdiff's own before an imported map (what segdiff is asked to
    explain, not its reference) and before the user's artefact run beside its Keras source
    (the source's runs are the reference the artefact is measured against); this machine's
    before a run merged from a bundle (a bundle cannot name its own reference); then the
    fewest knobs away from the defaults (batch 1 on the CPU)."""
    plain = RunConfig()
    away = sum(getattr(config, name) != getattr(plain, name) for name in KNOBS.names)
    return (imported, artefact, merged, away)


def default_reference(runs: Sequence[StudyRun]) -> StudyRun:
    """The run of the lowest :func:`reference_rank`; of those, the first repeat, then the
    first (a TensorFlow run, in one process, on the CPU before a GPU run)."""

    def rank(item: tuple[int, StudyRun]) -> tuple[tuple[bool, bool, bool, int], int, int]:
        order, run = item
        ranked = reference_rank(
            run.config,
            imported=run.imported,
            artefact=bool(run.artefact),
            merged=bool(run.merged_from),
        )
        return (ranked, run.repeat, order)

    return min(enumerate(runs), key=rank)[1]


class GroupAnalysis:
    """The analysis of one comparable group: ``runs`` (same model, image and map shape;
    float32) compared with ``reference`` at ``cutoff``, and with ``exact`` (the model in
    float64), where given, beside it."""

    def __init__(
        self,
        runs: Sequence[StudyRun],
        cutoff: float = DEFAULT_CUTOFF,
        reference: StudyRun | None = None,
        exact: StudyRun | None = None,
    ) -> None:
        if not runs:
            raise ValueError("a study needs at least one run")
        shapes = {run.probabilities.shape for run in runs}
        if len(shapes) != 1:
            raise ValueError(f"runs differ in map shape: {sorted(shapes)}")
        if wide := [run.label for run in runs if run.probabilities.dtype != np.float32]:
            # The analysis counts float32 steps: a float64 map would be rounded silently.
            raise ValueError(
                f"{', '.join(wide)}: not a float32 map; the exact reference (float64) is "
                "compared beside the reference, never among the float32 runs"
            )
        if exact is not None and exact.probabilities.shape not in shapes:
            raise ValueError(f"the exact map's shape {exact.probabilities.shape} is not {shapes}")
        self.runs = list(runs)
        # The exact (float64) run the float32 runs are measured against, beside the
        # reference, never among the runs nor as the reference (None: the group has none).
        self.exact = exact
        self.cutoff = cutoff
        self.reference = reference or default_reference(self.runs)
        self._flips: dict[str, np.ndarray] = {}
        self._flip_counts: dict[str, int] = {}
        self._classes: dict[str, np.ndarray] = {}  # a binary run's classes, once asked for
        # A new group's masks grow the process: ordinary pages (core/pages.py). A study at
        # another cutoff makes masks in place of its predecessor's: numpy's reused pages.
        self._masks_grow = True

    def at_cutoff(self, cutoff: float) -> GroupAnalysis:
        """The same runs at another cutoff. Differences, ULPs, verdicts and the margin do not
        depend on the cutoff and are carried over; only flips (and at-risk pixels) are redone,
        so dragging a cutoff costs one threshold per run, not a whole comparison."""
        moved = GroupAnalysis(self.runs, cutoff, self.reference, self.exact)
        moved._masks_grow = False
        for name in ("verdicts", "margin"):
            if name in self.__dict__:
                moved.__dict__[name] = self.__dict__[name]
        if self.multiclass:  # argmax ignores the cutoff: classes and flips stay
            moved._flips, moved._flip_counts = self._flips, self._flip_counts
            if "reference_classes" in self.__dict__:
                moved.__dict__["reference_classes"] = self.__dict__["reference_classes"]
        if "comparisons" in self.__dict__:
            if not self.multiclass:
                moved.flips_of(moved.others)  # all at once, side by side
            moved.__dict__["comparisons"] = {
                key: replace(
                    comparison,
                    flips=comparison.flips
                    if self.multiclass  # argmax ignores the cutoff
                    else moved.flip_count(self._run(key)),
                    cutoff=cutoff,
                )
                for key, comparison in self.__dict__["comparisons"].items()
            }
        return moved

    @property
    def all_runs(self) -> list[StudyRun]:
        """The runs and the exact run kept beside them: every map the study read."""
        return [*self.runs, *([self.exact] if self.exact else [])]

    @cached_property
    def exact_errors(self) -> dict[str, ExactError]:
        """Every run's error against the exact map (the reference's first), by key; empty
        without an exact run."""
        exact = self.exact
        if exact is None:
            return {}
        runs = [self.reference, *self.others]
        decided = self.exact_decided
        found = thread_map(
            lambda run: exact_error(
                exact.probabilities, run.probabilities, self.cutoff, run.label, decided
            ),
            runs,
        )
        return {run.key: error for run, error in zip(runs, found, strict=True)}

    @cached_property
    def flip_sides(self) -> dict[str, FlipSides]:
        """For every run that flips against the reference, which side the exact map takes at
        each flip, by the run's key; empty without an exact run."""
        exact = self.exact
        if exact is None:
            return {}
        reference = self.reference
        return {
            run.key: flip_sides(
                exact.probabilities,
                reference.probabilities,
                run.probabilities,
                self.cutoff,
                (reference.label, run.label),
                self.exact_decided,
            )
            for run in self.others
        }

    @cached_property
    def exact_decided(self) -> ExactDecisions | None:
        """The exact map's classes at the cutoff (decided in float64), its ties and the
        pixels float32 cannot decide, made once for every run measured against it; None
        without an exact run."""
        if self.exact is None:
            return None
        return exact_decisions(self.exact.probabilities, self.cutoff)

    def right_against_exact(self, run: StudyRun) -> np.ndarray | None:
        """H×W: where ``run``'s class is the exact map's and untied (core/exact.right_mask:
        a pixel tied in the exact map is right nowhere, and a run's own tie is no answer);
        None without an exact run."""
        decided = self.exact_decided
        if decided is None:
            return None
        return right_mask(decided, run.probabilities, self.cutoff, self.classes(run))

    def repeats_named_together(self, runs: Sequence[StudyRun]) -> list[tuple[str, StudyRun]]:
        """``runs``, a configuration's later repeats left out where their map is an earlier
        repeat's bit for bit, each run kept with the label that names all it stands for
        (``cpu b1 r0, r1``): what is said of one is then said once."""
        groups: list[list[StudyRun]] = []
        for run in sorted(runs, key=lambda run: run.repeat):
            same = next(
                (
                    group
                    for group in groups
                    if group[0].identity == run.identity
                    and np.array_equal(
                        group[0].probabilities.view(np.uint8), run.probabilities.view(np.uint8)
                    )
                ),
                None,
            )
            if same is None:
                groups.append([run])
            else:
                same.append(run)
        order = {run.key: index for index, run in enumerate(runs)}
        groups.sort(key=lambda group: order[group[0].key])
        return [
            (
                group[0].label
                if len(group) == 1
                else f"{self.configuration_of(group[0])} "
                + ", ".join(f"r{run.repeat}" for run in group),
                group[0],
            )
            for group in groups
        ]

    def exact_summary(self) -> ExactSummary | None:
        """Every run against the exact run (the reference first), None without one."""
        if self.exact is None:
            return None
        return ExactSummary(
            run=self.exact.label,
            cutoff=self.cutoff,
            multiclass=self.multiclass,
            errors=tuple(self.exact_errors.values()),
            flips=tuple(self.flip_sides.values()),
        )

    def _run(self, key: str) -> StudyRun:
        return next(run for run in self.runs if run.key == key)

    @property
    def multiclass(self) -> bool:
        return is_multiclass(self.reference.probabilities)

    @property
    def others(self) -> list[StudyRun]:
        return [run for run in self.runs if run.key != self.reference.key]

    @cached_property
    def comparisons(self) -> dict[str, MapComparison]:
        ref = self.reference.probabilities
        others = self.others
        found = thread_map(lambda run: compare_maps(ref, run.probabilities, self.cutoff), others)
        return {run.key: comparison for run, comparison in zip(others, found, strict=True)}

    def effect(self, run: StudyRun) -> Effect:
        """How ``run`` differs from the reference, from the comparison already made."""
        return Effect.of(self.comparisons[run.key], self.reference.probabilities)

    def rows(self) -> list[dict[str, Any]]:
        """One row per run against the reference, in the order the runs were given."""
        return [
            {
                "id": run.key[:8],
                "key": run.key,
                "label": run.label,
                "configuration": run.configuration,
                "repeat": run.repeat,
                "reference": self.reference.label,
                "kind": "softmax" if self.multiclass else "sigmoid",
                **self.comparisons[run.key].to_dict(),
            }
            for run in self.others
        ]

    def configuration_of(self, run: StudyRun) -> str:
        """The run's configuration, named with its host when another machine computed it (a
        run of another host is never a repeat of a local one)."""
        name = run.configuration
        here = self.reference.machine
        if run.machine and here and run.machine != here and not name.startswith(f"{run.machine}: "):
            return f"{run.machine}: {name}"
        return name

    @cached_property
    def verdicts(self) -> dict[str, RepeatVerdict]:
        """Determinism of every configuration that was run more than once (on one machine)."""
        by_identity: dict[tuple[RunConfig, str, str, str], list[StudyRun]] = {}
        for run in sorted(self.runs, key=lambda run: run.repeat):
            by_identity.setdefault(run.identity, []).append(run)
        return {
            self.configuration_of(group[0]): repeat_verdict([run.probabilities for run in group])
            for group in by_identity.values()
            if len(group) > 1
        }

    @cached_property
    def margin(self) -> float:
        """The largest |difference| from the reference over all runs."""
        return observed_margin(self.reference.probabilities, [r.probabilities for r in self.others])

    @cached_property
    def at_risk(self) -> np.ndarray:
        return at_risk_mask(self.reference.probabilities, self.margin, self.cutoff)

    def at_risk_sentence(self) -> str:
        pixels = int(self.at_risk.sum())
        if self.margin <= 0:
            return "At-risk pixels: none (no run differs from the reference)."
        if self.multiclass:
            return (
                f"At-risk pixels (argmax): {pixels:,} have their two most likely classes within "
                f"twice the largest observed difference (2 × {self.margin:.3g}) of each other."
            )
        return (
            f"At-risk pixels (cutoff {format_float32(self.cutoff)}): {pixels:,} lie within the "
            f"largest observed difference ({self.margin:.3g}) of the cutoff."
        )

    def flips(self, other: StudyRun) -> np.ndarray:
        """Pixels whose class differs from the reference's (computed once per run)."""
        return self.flips_of([other])[0]

    def flips_of(self, runs: Sequence[StudyRun]) -> list[np.ndarray]:
        """The flip masks of ``runs``, those not made yet made side by side."""
        missing = [run for run in runs if run.key not in self._flips]
        if missing and self.multiclass:
            reference, cutoff = self.reference.probabilities, self.cutoff
            masks = thread_map(lambda run: flip_mask(reference, run.probabilities, cutoff), missing)
            for run, mask in zip(missing, masks, strict=True):
                self._flips[run.key], self._flip_counts[run.key] = mask, int(np.count_nonzero(mask))
        elif missing:
            self._binary_flips(missing)
        return [self._flips[run.key] for run in runs]

    def _binary_flips(self, runs: Sequence[StudyRun]) -> None:
        """Binary ``runs``' flip masks and counts in one pass over the rows, the row blocks
        dealt out to the cores: each block of the reference is thresholded once (unless its
        classes are made), then each run's block is thresholded into a scratch block and
        compared with it while both are in cache. A run's classes are not kept: they are the
        reference's where its mask is clear (:meth:`classes`), and the bytes of a map this
        size, fresh from the system, cost as much as the pass itself (4 × 8192²)."""
        shape = self.reference.probabilities.shape[:2]
        made = self.__dict__.get("reference_classes")
        reference = np.empty(shape, dtype=np.uint8) if made is None else made
        empty = empty_in_ordinary_pages if self._masks_grow else np.empty
        masks = [empty(shape, bool) for _ in runs]
        cutoff = self.cutoff
        blocks = row_blocks(self.reference.probabilities)

        def fill(share: list[slice]) -> list[int]:
            counts = [0] * len(runs)
            rows = max((block.stop - block.start for block in share), default=0)
            scratch = np.empty((rows, *shape[1:]), dtype=np.uint8)
            for block in share:
                if made is None:
                    binary_classes_into(
                        self.reference.probabilities[block], cutoff, reference[block]
                    )
                own = scratch[: len(reference[block])]
                for index, run in enumerate(runs):
                    mask = masks[index][block]
                    binary_classes_into(run.probabilities[block], cutoff, own)
                    np.not_equal(own, reference[block], out=mask)
                    counts[index] += int(np.count_nonzero(mask))
            return counts

        shares = thread_map(fill, for_each_core(blocks))
        self.__dict__["reference_classes"] = reference
        for index, run in enumerate(runs):
            self._flips[run.key] = masks[index]
            self._flip_counts[run.key] = sum(share[index] for share in shares)

    @cached_property
    def reference_classes(self) -> np.ndarray:
        """The reference's class of every pixel at the cutoff (bytes, 0 and 1 for a binary
        map, made by the binary pass of no other run; the argmax of a multi-class one)."""
        if self.multiclass:
            return class_map(self.reference.probabilities, self.cutoff).astype(np.uint8, copy=False)
        self._binary_flips([])
        classes: np.ndarray = self.__dict__["reference_classes"]
        return classes

    def classes(self, run: StudyRun) -> np.ndarray:
        """``run``'s class of every pixel at the cutoff, as bytes (a binary run's from its
        flips: the reference's class, the other one where it flips)."""
        if run.key == self.reference.key:
            return self.reference_classes
        if self.multiclass:
            return class_map(run.probabilities, self.cutoff).astype(np.uint8, copy=False)
        if run.key not in self._classes:
            flips = self.flips(run)
            self._classes[run.key] = np.bitwise_xor(self.reference_classes, flips.view(np.uint8))
        return self._classes[run.key]

    def flip_count(self, other: StudyRun) -> int:
        """How many pixels flip: from the comparison where it is made, else from the mask (a
        cutoff change needs only this, not a whole comparison)."""
        if "comparisons" in self.__dict__:
            return self.comparisons[other.key].flips
        self.flips(other)
        return self._flip_counts[other.key]

    def any_flips(self) -> np.ndarray:
        """Pixels that flip in at least one run."""
        mask = np.zeros(self.reference.probabilities.shape[:2], dtype=bool)
        for run in self.others:
            mask |= self.flips(run)
        return mask

    def curve(self, other: StudyRun) -> FlipCurve:
        return flip_curve(self.reference.probabilities, other.probabilities)

    def pairwise(self) -> dict[str, Any]:
        """Max ULP and flips at the cutoff between every two runs (symmetric matrices)."""
        count = len(self.runs)
        max_ulp = np.zeros((count, count), dtype=np.int64)
        flips = np.zeros((count, count), dtype=np.int64)
        for i in range(count):
            for j in range(i + 1, count):
                result = compare_maps(
                    self.runs[i].probabilities, self.runs[j].probabilities, self.cutoff
                )
                max_ulp[i, j] = max_ulp[j, i] = result.max_ulp
                flips[i, j] = flips[j, i] = result.flips
        return {
            "labels": [run.label for run in self.runs],
            "max_ulp": max_ulp.tolist(),
            "flips": flips.tolist(),
        }
