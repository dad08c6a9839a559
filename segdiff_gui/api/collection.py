"""``open_cache`` and ``open_bundle``: the runs a cache or a bundle holds, grouped as people
compare them (model, image, model settings), one :class:`Study` per group. A bundle is read
in place, never merged; every entry is read as untrusted data, and one that cannot be read is
named in ``damaged`` while the rest stay readable."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from html import escape

from segdiff_gui.api.arguments import PathLike, cache_of, checked_cutoff, checked_path
from segdiff_gui.api.results import html_document
from segdiff_gui.api.study import Study
from segdiff_gui.api.tables import Table, make_table
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import InputError, in_few_lines
from segdiff_gui.core.text import printable, printable_lines
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.listing import ListedRun
from segdiff_gui.storage.loading import ChosenGroup, RunsSource, read_source
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import group_id, narrowed

__all__ = ["Runs", "open_bundle", "open_cache"]

_EMPTY_HINT = "compute some with segdiff_gui.run(model, images)"


class Runs:
    """Every run of a cache or bundle, in comparable groups. Iterate it, index it (by
    position or group id), or ask :meth:`study` for the group of a model, image or run."""

    def __init__(self, source: RunsSource, cutoff: float = DEFAULT_CUTOFF) -> None:
        self._source = source
        self.where = source.where
        self.cutoff = checked_cutoff(cutoff)
        #: The entries that could not be read, one line each (the rest are readable).
        self.damaged: list[str] = [str(error) for error in source.damaged]
        # As shown: the first few, then how many more.
        self._shown_damage = in_few_lines(source.damaged)
        self._groups = source.groups
        self._titles = source.titles

    @property
    def studies(self) -> list[Study]:
        return [self._study(chosen) for chosen in self._source.choose()]

    def study(
        self,
        model: str | None = None,
        image: str | None = None,
        group: str | None = None,
        ref: str | None = None,
    ) -> Study:
        """One group's study.

        Parameters
        ----------
        model, image : str, optional
            A model's or image's file name (or hash prefix), as ``segdiff ls`` shows them.
        group : str, optional
            A group id (``table()`` and ``segdiff ls`` show them).
        ref : str, optional
            The reference: a run's or configuration's label, or an id. It also chooses the
            group when the other names leave several.

        Raises
        ------
        InputError
            When nothing matches, or several groups do and none is chosen (they are listed).
        """
        try:
            chosen = self._source.choose(model, image, group, ref)
        except InputError as error:
            if ref is None or error.fix != "group":
                raise
            groups = narrowed(self._groups, model, image, group)
            raise InputError(ref, f"is a run of {self._several(groups)}") from None
        if len(chosen) > 1:
            raise InputError(self.where, f"holds {self._several([c.records for c in chosen])}")
        return self._study(chosen[0])

    def _several(self, groups: Sequence[Sequence[RunRecord]]) -> str:
        """``3 groups (a.png [1f2e3d], …); choose one with image=``: images name the groups
        where each has its own, titles (with their settings) where they share one."""
        by_image = len({g[0].target_name for g in groups}) == len(groups)
        listed = ", ".join(
            f"{g[0].target_name if by_image else self._titles[group_id(g[0])]} [{group_id(g[0])}]"
            for g in groups[:6]
        )
        more = f", and {len(groups) - 6} more" if len(groups) > 6 else ""
        choose = "image=" if by_image else "group="
        return f"{len(groups)} groups ({listed}{more}); choose one with {choose}"

    def table(self) -> Table:
        """One row per run, grouped: every key ``segdiff ls --json`` lists, with the same
        values, and the settings, device, runtime, host, whether merged and when."""
        rows = [ListedRun(record).row() for members in self._groups for record in members]
        return make_table(rows)

    def _study(self, chosen: ChosenGroup) -> Study:
        return Study(
            self._source.store,
            chosen,
            cutoff=self.cutoff,
            where=self.where,
            everything=self._source.records,
        )

    def __len__(self) -> int:
        return len(self._groups)

    def __iter__(self) -> Iterator[Study]:
        return iter(self.studies)

    def __getitem__(self, which: int | str) -> Study:
        if isinstance(which, int):
            return self._study(self._source.chosen(self._groups[which]))
        return self.study(group=which)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{escape(group_id(g[0]))}</td><td>{escape(self._titles[group_id(g[0])])}"
            f"</td><td>{len(g)}</td><td>{escape(', '.join(r.label for r in g[:8]))}"
            f"{' …' if len(g) > 8 else ''}</td></tr>"
            for g in self._groups
        )
        damaged = "".join(f"<li>{escape(line)}</li>" for line in self._shown_damage)
        return html_document(
            f"<p><b>{escape(self.where)}</b>: {len(self._source.records)} runs in "
            f"{len(self._groups)} groups</p><table><tr><th>group</th><th>model on image</th>"
            f"<th>runs</th><th>labels</th></tr>{rows}</table>"
            + (f"<p>Could not be read:</p><ul>{damaged}</ul>" if damaged else "")
        )

    def __repr__(self) -> str:
        lines = [f"<Runs {self.where}: {len(self._source.records)} runs in {len(self)} groups>"]
        for members in self._groups:
            title = self._titles[group_id(members[0])]
            labels = ", ".join(r.label for r in members[:6]) + (" …" if len(members) > 6 else "")
            lines.append(f"  [{group_id(members[0])}] {title}: {len(members)} runs ({labels})")
        lines += [f"  unreadable: {line}" for line in self._shown_damage]
        return printable_lines(lines)


def _warn_damaged(damaged: Sequence[InputError]) -> None:
    """The other unreadable entries of a store none of whose runs could be read (the first
    few, then how many more)."""
    for line in in_few_lines(damaged):
        warnings.warn(printable(f"unreadable: {line}"), stacklevel=4)


def open_cache(path: PathLike | ResultCache | None = None, cutoff: float = DEFAULT_CUTOFF) -> Runs:
    """The runs of a cache, grouped.

    Parameters
    ----------
    path : str or Path, optional
        The cache folder (default: ``$SEGDIFF_CACHE``, else the user cache folder).
    cutoff : float
        The cutoff its studies use unless given one.

    Returns
    -------
    Runs
        One :class:`Study` per model, image and settings; ``damaged`` names the entries
        that could not be read. A run whose map turns out damaged when a study reads it is
        left out of that study, and named in its ``damaged``.

    Raises
    ------
    InputError
        For a folder that is not a segdiff cache, or one that holds no runs.
    """
    cache = cache_of(path)
    cache.check_usable()
    if not cache.root.exists():
        raise InputError(cache.root, "no such cache folder")
    if not cache.is_marked and not cache.keys() and any(cache.root.iterdir()):
        raise InputError(cache.root, "is not a segdiff cache (it holds other files)")
    return Runs(read_source(cache, _EMPTY_HINT, _warn_damaged), cutoff)


def open_bundle(path: PathLike, cutoff: float = DEFAULT_CUTOFF) -> Runs:
    """The runs of a bundle file (``segdiff bundle``), grouped, read in place: nothing is
    merged into any cache.

    Parameters
    ----------
    path : str or Path
        The bundle. It is untrusted data: every entry is checked as it is read; one whose
        metadata is damaged is named in ``Runs.damaged``, one whose map is damaged in its
        study's ``damaged``, and the others stay readable.
    cutoff : float
        The cutoff its studies use unless given one.

    Returns
    -------
    Runs
    """
    bundle = BundleReader(checked_path(path, "bundle"))
    hint = "make one with 'segdiff bundle' on the machine that ran them"
    return Runs(read_source(bundle, hint, _warn_damaged), cutoff)
