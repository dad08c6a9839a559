"""``segdiff merge``: the runs of bundles added to the cache."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console

from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    common,
)
from segdiff_gui.cli.running import (
    open_cache,
    report_damaged,
)
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.cli.text import say
from segdiff_gui.core.test_sets import (
    SetCoverage,
    ShardManifest,
    images_with_runs,
    set_coverage,
)
from segdiff_gui.storage.bundle import check_bundle, merge_bundle
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.set_manifests import cache_manifests

if TYPE_CHECKING:
    pass


DESCRIPTION = (
    "Add the runs of bundles to the cache. A run already cached is compared bit for bit; one "
    "computed on another machine is kept beside the local one."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundles", nargs="+", help="bundle files made by 'segdiff bundle'")
    common(parser, "print what was merged as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    bundles = [check_bundle(path) for path in args.bundles]  # all read whole before any merge
    results = {str(bundle.path): merge_bundle(bundle.path, cache) for bundle in bundles}
    sets = _merged_sets(cache, [m for r in results.values() for m in r.manifests], err)
    if args.json:
        merged = {
            path: {**vars(result), "manifests": [m.to_dict() for m in result.manifests]}
            for path, result in results.items()
        }
        _json({**merged, "test_sets": [coverage.to_dict() for coverage in sets]})
        return EXIT_OK
    for path, result in results.items():
        others = len(result.from_other_machines)
        beside = f" ({others} from another machine, kept beside this one's)" if others else ""
        repaired = f", {len(result.repaired)} replacing damaged copies" if result.repaired else ""
        say(
            out,
            f"{path}: {len(result.added)} added{beside}{repaired}, "
            f"{len(result.identical)} already present",
        )
        for key in result.conflicts:
            say(
                err,
                f"{path}: run {key[:8]} is already cached with different values from the same "
                "machine; kept the cached one (a nondeterministic configuration?)",
            )
    for coverage in sets:  # shards arrive one by one: what is still missing is said, once
        if coverage.complete:
            say(out, coverage.merged_sentence())
        else:
            say(err, coverage.sentence())
    return EXIT_OK


def _merged_sets(
    cache: ResultCache, merged: list[ShardManifest], err: Console
) -> list[SetCoverage]:
    """How whole each test set that a merged bundle belongs to now is in ``cache``: its shards
    merged so far (this time or before), counted by the runs the cache holds of their images
    (a record is no evidence of runs that are not there)."""
    known, damaged = cache_manifests(cache)
    report_damaged(err, damaged)
    wanted = {(m.set_id, m.model_hash) for m in merged}
    if not wanted:
        return []
    models = {model for _, model in wanted}
    runs = {
        (r.study_model_hash, r.target_hash, r.label)
        for r in cache.records()
        if r.study_model_hash in models
    }
    found = []
    for set_id, model in sorted(wanted):
        chosen = [m for m in known if m.set_id == set_id]
        found += set_coverage(chosen, model, images_with_runs(chosen, runs))
    return found
