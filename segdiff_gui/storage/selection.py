"""Naming runs on the command line: a short-id prefix or a label (``cpu b64 r1``)."""

from __future__ import annotations

from collections.abc import Sequence

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import group_id, group_of, settings_text

__all__ = ["select_pair", "select_reference", "select_run", "select_runs"]

_LISTED = 8


def _described(record: RunRecord) -> str:
    """A run as a candidate is listed: what tells it from the others of its label."""
    settings = settings_text(record)
    return (
        f"{record.short_id} ({record.label}, {record.model_name}, {record.target_name}, group "
        f"{group_id(record)}{', ' + settings if settings else ''})"
    )


def _listing(records: Sequence[RunRecord]) -> str:
    shown = ", ".join(_described(r) for r in records[:_LISTED])
    more = f" and {len(records) - _LISTED} more; see 'segdiff ls'" if len(records) > _LISTED else ""
    return (shown or "none") + more


def _matches(records: Sequence[RunRecord], name: str) -> list[RunRecord]:
    by_label = [r for r in records if r.label == name]
    return by_label or [r for r in records if name and r.key.startswith(name.lower())]


def select_run(records: Sequence[RunRecord], name: str) -> RunRecord:
    """The one run that ``name`` means; an unknown or ambiguous name lists the candidates."""
    matches = _matches(records, name)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(name, f"names no run in the cache (runs: {_listing(records)})")
    several = len({group_id(r) for r in matches}) > 1
    raise InputError(name, f"is ambiguous: {_listing(matches)}", fix="group" if several else "")


def select_reference(records: Sequence[RunRecord], name: str) -> RunRecord:
    """What ``--ref`` (and ``explain --from/--to``) name in every command: a run by id prefix
    or label (``cpu b1 r0``), or a configuration by its label (``cpu b1``), meaning its first
    repeat."""
    try:
        return select_run(records, name)
    except InputError:
        firsts = [r for r in records if r.configuration == name]
        if not firsts:
            raise
        groups = {group_id(r) for r in firsts}
        if len(groups) > 1:  # one configuration in several groups: say so, never pick one
            shown = [min((r for r in firsts if group_id(r) == g), key=lambda r: r.repeat)
                     for g in sorted(groups)]  # fmt: skip
            raise InputError(
                name, f"is in {len(groups)} groups: {_listing(shown)}", fix="group"
            ) from None
        return min(firsts, key=lambda r: r.repeat)


def select_pair(
    records: Sequence[RunRecord],
    candidates: Sequence[RunRecord],
    first: str,
    second: str,
    preferred: Sequence[RunRecord] = (),
) -> tuple[RunRecord, RunRecord, list[RunRecord]]:
    """Two runs to compare, as ``export --ref/--other`` and ``explain`` and ``layers``
    ``--from/--to`` name them, each as ``--ref`` does (:func:`select_reference`): the first
    among ``preferred`` (where given: the runs of the settings a command runs with), else among
    ``candidates`` (the runs the command's model, image and group leave); the second beside it
    (in its group, where a label is one run), else among ``candidates``; it must be comparable
    with the first. Returns both and the first's group, from ``records``."""
    one = _select_in_turn((preferred, candidates), first)
    group = group_of(records, one)
    other = _select_in_turn((group, candidates), second)
    if other.key not in {r.key for r in group}:
        raise InputError(
            second,
            f"is not comparable with {one.label} (another model, image, preprocessing or map "
            "shape)",
        )
    return one, other, group


def _select_in_turn(pools: Sequence[Sequence[RunRecord]], name: str) -> RunRecord:
    """What ``name`` names in the first pool where it names one run, else in the last (whose
    error is said)."""
    for pool in pools[:-1]:
        if pool:
            try:
                return select_reference(pool, name)
            except InputError:
                pass
    return select_reference(pools[-1], name)


def select_runs(records: Sequence[RunRecord], names: Sequence[str]) -> list[RunRecord]:
    """Every run a label names (a run's, ``cpu b1 r0``, or a configuration's, ``cpu b1``: each
    of its repeats), the one run an id prefix names; all runs for no names."""
    if not names:
        return list(records)
    chosen: dict[str, RunRecord] = {}
    for name in names:
        matches = _matches(records, name) or [r for r in records if r.configuration == name]
        by_id = not any(name in (r.label, r.configuration) for r in matches)
        if not matches:
            raise InputError(name, f"names no run in the cache (runs: {_listing(records)})")
        if by_id and len(matches) > 1:
            raise InputError(name, f"is ambiguous: {_listing(matches)}")
        chosen.update((r.key, r) for r in matches)
    return list(chosen.values())
