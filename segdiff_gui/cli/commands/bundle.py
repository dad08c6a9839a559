"""``segdiff bundle``: chosen runs written to one portable .h5 file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from segdiff_gui.cli.parser_parts import (
    common,
)
from segdiff_gui.cli.running import (
    bundle_target,
    open_cache,
    report_damaged,
)
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.cli.text import say
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.test_sets import (
    manifests_of,
)
from segdiff_gui.storage.bundle import write_bundle
from segdiff_gui.storage.selection import select_runs
from segdiff_gui.storage.set_manifests import cache_manifests

if TYPE_CHECKING:
    pass


DESCRIPTION = (
    "Write runs (maps, provenance, target images) to one HDF5 file that 'segdiff merge' adds to "
    "another cache, e.g. from a GPU server to a laptop."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", help="bundle file to write (.h5)")
    parser.add_argument(
        "runs",
        nargs="*",
        help="run id prefixes or labels such as 'cpu b64 r0' (a label takes "
        "every run that has it; a configuration's, 'cpu b64', every repeat of it); default: all "
        "runs",
    )
    common(parser, "print what was written as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args)
    target = bundle_target(Path(args.out))
    scan = cache.scan(with_maps=True)  # a run whose map is damaged is left out, and named
    records = select_runs(scan.records, args.runs)
    if not records:
        report_damaged(err, scan.damaged)
        raise InputError(cache.root, "holds no runs to bundle")
    # The test sets merged here that these runs belong to travel with them (a damaged record
    # cannot, and is named below).
    known, unreadable = cache_manifests(cache)
    carried = manifests_of(known, ((r.study_model_hash, r.target_hash) for r in records))
    count = write_bundle(cache, [r.key for r in records], target, carried)
    if args.json:
        _json({"bundle": str(target), "runs": [r.key for r in records]})
    else:
        shards = f", with {_plural(len(carried), 'test-set shard')}" if carried else ""
        say(out, f"wrote {_plural(count, 'run')} to {target}{shards}")
    # The damaged ones are left out, and said to be: the bundle is not all the cache had.
    return report_damaged(err, [*scan.damaged, *unreadable])
