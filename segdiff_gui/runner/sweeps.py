"""A test-set sweep: which stored runs form it (one model version, one group per image), its
reference, the ground truth, and the summary, one image at a time (maps read, summarised and
dropped). :class:`SweepSession` is the one workflow ``segdiff sweep``, ``segdiff run
--sweep``, ``Study.sweep`` and the window's Test set tab drive; each shows its result its own
way, and every failure is one :class:`InputError`, the same line whichever front end."""

from __future__ import annotations

import queue
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from segdiff_gui.core.analysis import multiclass_shape
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.protocol import Message, RunCached, RunFailed, RunFinished
from segdiff_gui.core.study import configuration_name, reference_rank
from segdiff_gui.core.sweep import ImageSummary, SweepSummary, summarise_alone, summarise_image
from segdiff_gui.core.test_sets import ShardManifest, set_coverage, set_identity
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import Drive, MatrixOutcome, follow
from segdiff_gui.runner.plan import MatrixPlan
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_run
from segdiff_gui.storage.set_manifests import cache_manifests, write_cache_manifest
from segdiff_gui.storage.studies import (
    RunStore,
    comparable_groups,
    configuration_key,
    group_id,
    load_study,
    settings_text,
    without_exact,
)

__all__ = [
    "SummariesAhead",
    "SummaryMade",
    "SweepResult",
    "SweepSession",
    "default_configuration",
    "summarise_sweep",
    "sweep_manifest",
    "sweep_groups",
    "sweep_reference",
]


def _version(record: RunRecord) -> str:
    """The model file and its settings: a sweep's images must all share them."""
    return canonical_json([record.study_model_hash, record.preprocessing, record.output])


def sweep_groups(
    records: Sequence[RunRecord], model: str | None = None, group: str | None = None
) -> list[list[RunRecord]]:
    """The runs of one model, one comparable group per image, in image-name order. ``group``
    (a group id) picks the model file and settings that group was run with, on every image.
    Where an image's configuration ran in a sweep's batch, the sweep's runs stand for it
    (see :func:`_swept`)."""
    records = _swept(records)
    groups = comparable_groups(records, model=model)
    if group is not None:
        chosen = {_version(g[0]) for g in comparable_groups(records, model=model, group=group)}
        groups = [g for g in groups if _version(g[0]) in chosen]
    models = {g[0].study_model_name for g in groups}
    if len(models) > 1:
        names = ", ".join(sorted(models))
        raise InputError(
            "model", f"the runs cover {len(models)} models ({names}); name one", fix="model"
        )
    # One model name may hide several versions (retrained file, other preprocessing or
    # output): a test-set mean over a mixture would count every image twice.
    versions = {_version(g[0]): g[0] for g in groups}
    if len(versions) > 1:
        listed = "; ".join(
            f"group {group_id(r)} ({r.target_name}): model {r.study_model_hash[:8]}, "
            f"{settings_text(r) or 'defaults'}"
            for r in versions.values()
        )
        raise InputError(
            groups[0][0].study_model_name,
            f"was run in {len(versions)} versions (model file, preprocessing or output "
            f"differ: {listed}); choose one by the group of any of its images",
            fix="group",
        )
    return sorted(groups, key=lambda g: (g[0].target_name, g[0].target_hash))


def _swept(records: Sequence[RunRecord]) -> list[RunRecord]:
    """``records`` less the runs of one target (their batch the target and the set cycled, or
    copies) of every image and configuration that also ran in a sweep's batch of consecutive
    images: a test set's figures are the sweep's, as ``predict(x, batch_size)`` computes
    them, not two batches of one configuration. A sweep's run whose target leads a full batch
    is the same computation as the run of one target, and shares its key."""
    in_sweeps = {
        (group_id(r), configuration_key(r)) for r in records if r.batch_position is not None
    }
    return [
        r
        for r in records
        if r.batch_position is not None or (group_id(r), configuration_key(r)) not in in_sweeps
    ]


def _reference_run(records: Sequence[RunRecord], configuration: str) -> RunRecord | None:
    matches = [r for r in records if r.configuration == configuration]
    return min(matches, key=lambda r: r.repeat) if matches else None


def default_configuration(records: Sequence[RunRecord]) -> str:
    """The configuration a sweep is measured against: that of the run a study takes as its
    default reference (core/study.reference_rank: this machine's run of segdiff's own with
    every knob at its default, batch 1 on the CPU, else the nearest; never the artefact's
    beside its source while the source's are there)."""

    def rank(item: tuple[int, RunRecord]) -> tuple[tuple[bool, bool, bool, int], int, int]:
        order, record = item
        provenance = record.provenance
        ranked = reference_rank(
            record.run_config,
            imported=bool(provenance.imported_digest),
            artefact=provenance.source is not None,
            merged=provenance.merged,
        )
        return (ranked, record.repeat, order)

    return min(enumerate(records), key=rank)[1].configuration


def sweep_reference(groups: Sequence[Sequence[RunRecord]], name: str) -> str:
    """The configuration a sweep's ``--ref`` (or ``ref=``) names: a configuration's label
    (``cpu b8``, on every image), a run's label (``cpu b8 r0``: its configuration), or an id
    prefix. Every image has the same labels, so a label is never ambiguous here."""
    everything = [record for members in groups for record in members]
    if any(record.configuration == name for record in everything):
        return name
    by_label = {record.configuration for record in everything if record.label == name}
    if len(by_label) == 1:
        return by_label.pop()
    return select_run(everything, name).configuration


def summarise_sweep(
    store: RunStore,
    groups: Sequence[Sequence[RunRecord]],
    *,
    cutoff: float,
    reference: str | None = None,
    truth: TruthFolder | None = None,
    damaged: list[InputError] | None = None,
    manifests: Sequence[ShardManifest] = (),
    made: dict[str, SummaryMade] | None = None,
) -> SweepSummary:
    """Every image's runs against the ``reference`` configuration (default: ``cpu b1``, else
    the first configuration) and against its ground truth. With a ``damaged`` list, a run
    whose map cannot be read is left out and its error added there (an image whose reference
    run it was is left out, as one without a reference run); without one, it raises. The
    test sets of ``manifests`` that the images belong to say what of them is missing. An
    image's summary in ``made`` (:class:`SummariesAhead`'s) is taken where it fits."""
    if not groups:
        raise _nothing_to_summarise()
    if reference is None:
        reference = default_configuration(groups[0])
    summary: SweepSummary | None = None
    without_reference = []
    summarised = []
    for group in groups:
        chosen = _reference_run(group, reference)
        if chosen is None:  # an interrupted or partly failed sweep: say so, go on
            without_reference.append(group[0].target_name)
            continue
        ahead = (made or {}).get(group[0].target_hash)
        if ahead is not None and ahead.fits(group, reference, cutoff, truth):
            image, multiclass = ahead.image, ahead.multiclass
        else:
            try:
                found = summarised_image(store, group, chosen, cutoff, truth, damaged)
            except InputError as error:  # none of the image's maps could be read
                if damaged is None:
                    raise
                damaged.append(error)
                found = None
            if found is None:  # its reference is unreadable
                without_reference.append(group[0].target_name)
                continue
            image, multiclass = found
        if summary is None:
            summary = SweepSummary(reference, cutoff, multiclass, group[0].study_model_name)
        summary.add(image)
        summarised.append(group[0].target_hash)
    if summary is None:
        known = sorted({r.configuration for g in groups for r in g})
        raise InputError(reference, f"has no run on any image (configurations: {', '.join(known)})")
    summary.without_reference = without_reference
    summary.coverage = set_coverage(manifests, groups[0][0].study_model_hash, summarised)
    if truth is not None and not summary.has_truth:
        raise truth.matches_none()
    return summary


def summarised_image(
    store: RunStore,
    group: Sequence[RunRecord],
    chosen: RunRecord,
    cutoff: float,
    truth: TruthFolder | None,
    damaged: list[InputError] | None = None,
) -> tuple[ImageSummary, bool] | None:
    """One image's runs (``group``) against ``chosen`` and its truth, and whether its map holds
    classes (the maps of one image at a time); None where the reference's map cannot be read
    and ``damaged`` takes the error (without it, it is raised). A run with nothing to be
    compared with (alone, without truth) is summarised from its record: no map is read."""
    if truth is None and [record.key for record in group] == [chosen.key] and without_exact(group):
        name = configuration_name(chosen.label, chosen.repeat)
        image = summarise_alone(chosen.target_name, name, chosen.map_shape)
        return image, multiclass_shape(chosen.map_shape)
    study = load_study(store, group, cutoff, chosen, damaged)
    if study.reference.key != chosen.key:
        return None
    shape = study.reference.probabilities.shape
    classes = shape[2] if study.multiclass else 2
    labels = truth.read(group[0].target_name, shape[:2], classes) if truth else None
    return summarise_image(group[0].target_name, study, labels), study.multiclass


@dataclass(frozen=True)
class SummaryMade:
    """One image's summary made while its sweep computed, and what it was made from: its
    runs' keys, the reference configuration, the cutoff and the truth folder; and whether the
    map holds classes (softmax)."""

    keys: frozenset[str]
    reference: str
    cutoff: float
    truth: TruthFolder | None
    multiclass: bool
    image: ImageSummary

    def fits(
        self, group: Sequence[RunRecord], reference: str, cutoff: float, truth: TruthFolder | None
    ) -> bool:
        """Whether it is the summary the end would make of ``group``."""
        same = self.keys == frozenset(record.key for record in group) and self.cutoff == cutoff
        return same and self.reference == reference and _folder(self.truth) == _folder(truth)


def _folder(truth: TruthFolder | None) -> Path | None:
    return truth.folder if truth is not None else None


class SummariesAhead:
    """A sweep's images summarised while it computes. It hears the runner (:meth:`heard`);
    once every planned run of an image is stored, that image's maps (just written, still in
    the page cache) are read and summarised on a thread of its own while the child computes
    the next batches. :meth:`finish` waits for the images said complete so far and returns
    their summaries by image hash; the end's summary takes each one that fits and makes the
    others (an image with a failed run, or whose maps cannot be read here: it says why)."""

    def __init__(
        self,
        store: RunStore,
        plan: MatrixPlan,
        cutoff: float,
        reference: str | None,
        truth: TruthFolder | None,
    ) -> None:
        self._store, self._cutoff = store, cutoff
        self._reference, self._truth = reference, truth
        self._target_of = {run.key: run.target for run in plan.runs}
        keys: dict[int, set[str]] = {}
        for run in plan.runs:
            keys.setdefault(run.target, set()).add(run.key)
        self._keys_of = {target: frozenset(found) for target, found in keys.items()}
        self._waiting = keys
        self._made: dict[str, SummaryMade] = {}
        self._queue: queue.SimpleQueue[frozenset[str] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="sweep summaries", daemon=True)
        self._thread.start()

    def heard(self, message: Message) -> None:
        """One of the runner's messages (on the thread that drives the runner)."""
        if not isinstance(message, RunFinished | RunCached | RunFailed):
            return
        target = self._target_of.get(message.key)
        left = self._waiting.get(target) if target is not None else None
        if left is None or target is None:
            return
        if isinstance(message, RunFailed):
            del self._waiting[target]  # left to the end, which says why
            return
        left.discard(message.key)
        if not left:
            del self._waiting[target]
            self._queue.put(self._keys_of[target])

    def finish(self) -> dict[str, SummaryMade]:
        """The summaries made, once those of every image said complete are made."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        return dict(self._made)

    def _work(self) -> None:
        while (keys := self._queue.get()) is not None:
            try:
                self._summarise(keys)
            except Exception:  # noqa: BLE001, S112 - the end's summary makes it and says why
                continue

    def _summarise(self, keys: frozenset[str]) -> None:
        records = [self._store.read_run(key, with_map=False) for key in sorted(keys)]
        groups = comparable_groups(records)
        if len(groups) != 1:
            return
        (group,) = groups
        reference = (
            default_configuration(group)
            if self._reference is None
            else sweep_reference([group], self._reference)
        )
        chosen = _reference_run(group, reference)
        if chosen is None:
            return
        found = summarised_image(self._store, group, chosen, self._cutoff, self._truth)
        if found is not None:
            image, multiclass = found
            self._made[group[0].target_hash] = SummaryMade(
                keys, reference, self._cutoff, self._truth, multiclass, image
            )


def sweep_manifest(
    plan: MatrixPlan, shard: tuple[int, int] | None, stored: Collection[str]
) -> ShardManifest:
    """What a sweep's bundle says it is: shard ``shard`` (default: the whole set, 1/1) of the
    set of the plan's model (its study's: an artefact's source's) and images, and of its
    images those with a planned run that is not among the ``stored`` keys (it failed)."""
    incomplete = {run.target for run in plan.runs if run.key not in stored}
    return ShardManifest(
        set_id=set_identity(plan.study_model_hash, [image.hash for image in plan.images]),
        model_hash=plan.study_model_hash,
        size=len(plan.images),
        shard=shard or (1, 1),
        images=tuple((plan.images[t].name, plan.images[t].hash) for t in plan.targets),
        missing=tuple(plan.images[t].name for t in plan.targets if t in incomplete),
        runs=tuple(sorted({run.label for run in plan.runs})),
        unit=plan.unit,
    )


def _unresized(request: MatrixRequest) -> bool:
    """Whether the maps will have the images' size (the model takes them as they are)."""
    return request.settings.preprocessing.resize == "refuse"


def _quietly(runner: MatrixRunner) -> MatrixOutcome:
    return follow(runner, lambda _message: None)


def _nothing_to_summarise() -> InputError:
    return InputError("sweep", "no runs to summarise")


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: its summary (``None`` where a sweep that ran its matrix first has no
    run stored), and, where it ran, the plan, what happened to every run, the runs left out
    because they could not be read, and what it stored."""

    summary: SweepSummary | None
    plan: MatrixPlan | None = None
    outcome: MatrixOutcome | None = None
    damaged: tuple[InputError, ...] = ()
    # Where it ran: the keys of its runs that are stored (readable), and which set (or shard
    # of one) they are, as :meth:`SweepSession.stored` recorded them.
    stored: tuple[str, ...] = ()
    manifest: ShardManifest | None = None

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The runs of the sweep that failed (label, error): their images are left out."""
        return self.outcome.failed if self.outcome is not None else []

    def summarised(self) -> SweepSummary:
        """The summary, for a front end that has nothing to show without one."""
        if self.summary is None:
            raise _nothing_to_summarise()
        return self.summary


class SweepSession:
    """One test-set sweep, from the front end's options: the ``runs`` stored in ``store`` (a
    cache's or a bundle's), or a ``request`` whose matrix is run on every image first (its
    cache is ``store``; :meth:`run` with the front end's drive, or :meth:`start` and then
    :meth:`summarise` where the front end's own worker drives the runner).

    ``model`` (a name or id) and ``group`` (a group id: that group's model file and settings on
    every image) choose the runs; ``reference`` names the configuration every image is
    compared with as ``--ref`` does (default: :func:`default_configuration`); ``masks`` is a
    folder of ground truth, checked against the request's images before anything runs (where
    maps have the images' size). With ``leave_out_damaged``, a run whose map cannot be read is
    left out and named in :attr:`damaged`; without, it stops the sweep.
    """

    def __init__(
        self,
        store: RunStore,
        *,
        cutoff: float = DEFAULT_CUTOFF,
        runs: Sequence[RunRecord] = (),
        request: MatrixRequest | None = None,
        reference: str | None = None,
        masks: str | Path | None = None,
        model: str | None = None,
        group: str | None = None,
        leave_out_damaged: bool = False,
        made: dict[str, SummaryMade] | None = None,
    ) -> None:
        self.store, self.cutoff, self.runs = store, cutoff, list(runs)
        # Images summarised while another session's sweep computed (made_ahead()).
        self._made = made or {}
        self.reference, self.model, self.group = reference, model, group
        self.leave_out_damaged = leave_out_damaged
        # Every image, none the target (a shard keeps its slice).
        self.request = replace(request, sweep=True, target=None) if request is not None else None
        self.truth = TruthFolder(masks) if masks is not None else None
        if self.truth is not None and self.request is not None and _unresized(self.request):
            self.truth.check_images(list(self.request.images))  # before anything runs
        #: The runs left out because they could not be read, one error each.
        self.damaged: list[InputError] = []
        self.plan: MatrixPlan | None = None
        #: Which set (or shard of one) a sweep that ran its request stored (see stored()).
        self.manifest: ShardManifest | None = None
        self._ahead: SummariesAhead | None = None  # where it ran its request: see start()

    def start(self, gpus: Sequence[str] | None = None) -> MatrixRunner:
        """The runner of the sweep's request (what is cached is served from the cache)."""
        if self.request is None:
            raise InputError("sweep", "has no model and images to run, only stored runs")
        runner = self.request.start(gpus)
        self.plan = runner.plan
        if self.store is self.request.cache:  # its images summarised as their runs are stored
            self._ahead = SummariesAhead(
                self.store, runner.plan, self.cutoff, self.reference, self.truth
            )
            runner.listen(self._ahead.heard)
        return runner

    def stored(self) -> list[RunRecord]:
        """The sweep's runs: those given, or, once it has started, its plan's runs that are in
        the cache (one that cannot be read is left out and named in :attr:`damaged`)."""
        if self.plan is None or self.request is None:
            return list(self.runs)
        cache, found = self.request.cache, []
        for run in self.plan.runs:
            if cache.has(run.key):
                try:  # metadata now, maps one image at a time
                    found.append(cache.read_run(run.key, with_map=False))
                except InputError as error:  # damaged, and computing it again failed too
                    self.damaged.append(error)
        # Which set (or shard of one) these runs are, kept in the cache as a merge keeps a
        # bundle's: a later sweep there counts the set by it.
        manifest = sweep_manifest(self.plan, self.request.shard, {r.key for r in found})
        if manifest != self.manifest:  # the window summarises again: written once, as it is
            self.manifest = manifest
            if cache.write_problem() is None:  # a read-only cache is summarised, not added to
                write_cache_manifest(cache, manifest)
        return found

    def summarise(self, records: Sequence[RunRecord] | None = None) -> SweepSummary:
        """The summary of ``records`` (default: :meth:`stored`): one model version's groups,
        every image against the reference, and against its mask where there is one."""
        chosen = self.stored() if records is None else records
        groups = sweep_groups(chosen, self.model, self.group)
        reference = None if self.reference is None else sweep_reference(groups, self.reference)
        damaged = self.damaged if self.leave_out_damaged else None
        manifests = self._manifests()
        made = self.made_ahead()
        return summarise_sweep(
            self.store, groups, cutoff=self.cutoff, reference=reference, truth=self.truth,
            damaged=damaged, manifests=manifests, made=made,
        )  # fmt: skip

    def made_ahead(self) -> dict[str, SummaryMade]:
        """The images summarised while this session's sweep computed (waiting for those of
        every image whose runs are stored), with any given: for a summary of the same runs
        made by another session (the window's, at the reference and masks on show)."""
        made = dict(self._made)
        if self._ahead is not None:
            made.update(self._ahead.finish())
        return made

    def _manifests(self) -> list[ShardManifest]:
        """The test sets the sweep is measured against: the one it ran, where it ran its
        request; else those the store knows, a bundle's own or those merged into a cache (a
        damaged record stops the sweep, or with ``leave_out_damaged`` is named and left out:
        then a set may be shown without what is missing of it, and the record is named)."""
        if self.manifest is not None:
            return [self.manifest]
        if isinstance(self.store, BundleReader):
            return self.store.manifests
        if not isinstance(self.store, ResultCache):
            return []
        found, damaged = cache_manifests(self.store)
        if damaged and not self.leave_out_damaged:
            raise damaged[0]
        self.damaged.extend(damaged)
        return found

    def run(self, drive: Drive | None = None) -> SweepResult:
        """The sweep: with a request, its runs first, driven to the end by ``drive`` (the
        front end's progress, which raises what stops the matrix its own way; default: none
        shown), then what is stored of them (no summary where nothing is); else the stored
        runs."""
        if self.request is None:
            return SweepResult(self.summarise(), damaged=tuple(self.damaged))
        runner = self.start()
        outcome = (drive or _quietly)(runner)
        records = self.stored()
        summary = self.summarise(records) if records else None
        return SweepResult(
            summary, runner.plan, outcome, tuple(self.damaged),
            tuple(record.key for record in records), self.manifest,
        )  # fmt: skip
