"""Where analysed runs come from, for every front end that asks questions of stored runs (the
CLI's ``compare``, ``report``, ``diagnose`` …, and the Python API): a cache or a bundle (read
in place, never merged), its runs split into comparable groups, and one study per group."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import Study
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_reference
from segdiff_gui.storage.studies import (
    RunStore,
    comparable_groups,
    exact_of,
    group_id,
    group_of,
    group_titles,
    load_study,
)

__all__ = ["GroupStudy", "RunsSource", "group_studies", "read_source"]


class RunsSource(NamedTuple):
    """The runs of a cache or a bundle (metadata only), where they were read, and every entry
    that could not be read (a front end says them: it did not see those runs)."""

    store: RunStore
    records: list[RunRecord]
    where: str
    damaged: list[InputError]


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


class GroupStudy(NamedTuple):
    """One comparable group's study, a sample record of it, and its title (which names the
    settings where two groups of one model and image differ in them)."""

    study: Study
    record: RunRecord
    title: str


def group_studies(
    source: RunsSource,
    cutoff: float,
    model: str | None = None,
    image: str | None = None,
    group: str | None = None,
    ref: str | None = None,
) -> list[GroupStudy]:
    """One study per comparable group (or just the group of ``ref``, a run or configuration
    label or id). A group none of whose maps can be read is left out, its error added to
    ``source.damaged``; the others are studied."""
    records, damaged = source.records, source.damaged
    titles = group_titles(comparable_groups(records))
    groups = comparable_groups(records, model, image, group)
    if ref:
        # A label like "cpu b1 r0" exists for every image: model/image/group narrow it.
        reference = select_reference(_members(groups), ref)
        chosen = group_of(records, reference)
        exact = exact_of(records, reference)
        study = load_study(source.store, chosen, cutoff, reference, damaged, exact)
        return [GroupStudy(study, reference, titles[group_id(reference)])]
    studies = []
    for members in groups:
        try:
            exact = exact_of(records, members[0])
            study = load_study(source.store, members, cutoff, None, damaged, exact)
        except InputError as error:  # no run of the group could be read: the others can
            damaged.append(error)
            continue
        studies.append(GroupStudy(study, members[0], titles[group_id(members[0])]))
    return studies


def _members(groups: Sequence[Sequence[RunRecord]]) -> list[RunRecord]:
    return [record for members in groups for record in members]
