"""The one way from a store to the analysis of one group, for every front end that asks
questions of stored runs (the CLI's ``compare``, ``export``, ``report``, ``check``; the API's
``open_cache`` and ``open_bundle``): a cache or a bundle scanned (read in place, never
merged) and its runs split into comparable groups once (:func:`read_source`); the group a
model, an image, a group id or a reference names chosen with its exact run
(:meth:`RunsSource.choose`); its maps read once into the analysis (:func:`load_group`).
:func:`analyses` does all three."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_reference
from segdiff_gui.storage.studies import (
    RunStore,
    exact_of,
    group_id,
    group_titles,
    grouped,
    load_study,
    narrowed,
    without_exact,
)

__all__ = ["ChosenGroup", "GroupStudy", "RunsSource", "analyses", "load_group", "read_source"]


class ChosenGroup(NamedTuple):
    """One comparable group chosen, before its maps are read: its compared runs (float32, in
    natural order), the reference named (``None``: the group's default), the group's exact run
    (float64; ``None``: it has none) and its title."""

    records: list[RunRecord]
    reference: RunRecord | None
    exact: RunRecord | None
    title: str

    @classmethod
    def of_runs(cls, records: Sequence[RunRecord]) -> ChosenGroup:
        """The runs one request computed (one comparable group, its exact run among them where
        it has one), against the default reference, untitled."""
        members = without_exact(records) or list(records)  # only an exact run: said on loading
        return cls(members, None, exact_of(records, members[0]) if members else None, "")

    @property
    def record(self) -> RunRecord:
        """A sample record: the reference named, else the group's first run."""
        return self.reference or self.records[0]


@dataclass(frozen=True)
class RunsSource:
    """The runs of a cache or a bundle (metadata only), where they were read, every entry that
    could not be read (a front end says them: it did not see those runs), and the runs split
    into comparable groups (once), with their titles."""

    store: RunStore
    records: list[RunRecord]
    where: str
    damaged: list[InputError]

    @cached_property
    def groups(self) -> list[list[RunRecord]]:
        """Every comparable group, split once (:func:`~segdiff_gui.storage.studies.grouped`)."""
        return grouped(self.records)

    @cached_property
    def titles(self) -> dict[str, str]:
        """Each group's title by its id."""
        return group_titles(self.groups)

    def choose(
        self,
        model: str | None = None,
        image: str | None = None,
        group: str | None = None,
        ref: str | None = None,
    ) -> list[ChosenGroup]:
        """The groups of the model, image and group id named (all for none), or the one group
        of ``ref`` (a run's or configuration's label, or an id), which they narrow (a label
        like ``cpu b1 r0`` exists for every image). A name that matches nothing is refused,
        as is a ``ref`` in several groups (``fix="group"``)."""
        groups = narrowed(self.groups, model, image, group)
        if ref is None:
            return [self.chosen(members) for members in groups]
        reference = select_reference([r for members in groups for r in members], ref)
        members = next(g for g in groups if any(r.key == reference.key for r in g))
        return [self.chosen(members, reference)]

    def chosen(self, members: list[RunRecord], reference: RunRecord | None = None) -> ChosenGroup:
        """``members`` (one comparable group) chosen against ``reference``."""
        exact = exact_of(self.records, members[0])
        return ChosenGroup(members, reference, exact, self.titles[group_id(members[0])])


def read_source(
    store: ResultCache | BundleReader,
    empty_hint: str,
    report: Callable[[Sequence[InputError]], object],
) -> RunsSource:
    """Scan ``store``. A store with no readable run raises: its first damaged entry's error
    (the others given to ``report`` first), or that it holds no runs, with ``empty_hint``
    (how this front end makes some)."""
    scan = store.scan()
    where = str(store.path if isinstance(store, BundleReader) else store.root)
    if not scan.records:
        if scan.damaged:
            report(scan.damaged[1:])
            raise scan.damaged[0]
        raise InputError(where, f"holds no runs; {empty_hint}")
    return RunsSource(store, scan.records, where, list(scan.damaged))


def load_group(
    store: RunStore, chosen: ChosenGroup, cutoff: float, damaged: list[InputError] | None
) -> GroupAnalysis:
    """The analysis of ``chosen`` at ``cutoff``, each map read once, its exact run beside it;
    with a ``damaged`` list, a run whose map cannot be read is left out and its error added
    there (see :func:`~segdiff_gui.storage.studies.load_study`)."""
    return load_study(store, chosen.records, cutoff, chosen.reference, damaged, chosen.exact)


class GroupStudy(NamedTuple):
    """One comparable group's analysis, a sample record of it, and its title (which names the
    settings where two groups of one model and image differ in them)."""

    study: GroupAnalysis
    record: RunRecord
    title: str


def analyses(
    source: RunsSource,
    cutoff: float,
    model: str | None = None,
    image: str | None = None,
    group: str | None = None,
    ref: str | None = None,
) -> list[GroupStudy]:
    """The analysis of each group chosen (:meth:`RunsSource.choose`). A group none of whose
    maps can be read is left out, its error added to ``source.damaged`` (the group of ``ref``
    raises it); the others are analysed."""
    studies = []
    for chosen in source.choose(model, image, group, ref):
        try:
            study = load_group(source.store, chosen, cutoff, source.damaged)
        except InputError as error:  # no run of the group could be read: the others can
            if ref is not None:
                raise
            source.damaged.append(error)
            continue
        studies.append(GroupStudy(study, chosen.record, chosen.title))
    return studies
