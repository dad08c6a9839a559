"""The cached runs (or a bundle's, without merging it) that the commands asking questions of
stored runs read (``compare``, ``export``, ``report``, ``check``, ``diagnose``, ``sweep``), in
comparable groups. No TensorFlow, no children: everything is in the HDF5 files."""

from __future__ import annotations

import argparse

from segdiff_gui.cli.running import err_console, open_cache, report_damaged
from segdiff_gui.core.errors import InputError
from segdiff_gui.runner.reports import (
    ReportContext,
    report_context,
)
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.loading import GroupStudy, RunsSource, analyses, read_source
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import (
    RunStore,
)

__all__ = ["context_of", "runs_source", "studies_of"]


def runs_source(args: argparse.Namespace) -> RunsSource:
    """The runs to analyse: a bundle given with --bundle, else the cache; and every entry that
    could not be read (each command reports them, and then exits 2: it did not see them)."""
    store = BundleReader(args.bundle) if getattr(args, "bundle", None) else open_cache(args)
    return read_source(
        store,
        "run 'segdiff run' or 'segdiff demo' first",
        lambda damaged: report_damaged(err_console(), damaged),
    )


def studies_of(
    args: argparse.Namespace,
) -> tuple[RunStore, list[GroupStudy], str, list[InputError]]:
    """One study per comparable group (or just the group of --ref), with a sample record."""
    source = runs_source(args)
    studies = analyses(source, args.cutoff, args.model, args.image, args.group, args.ref)
    return source.store, studies, source.where, source.damaged


def context_of(record: RunRecord, where: str) -> ReportContext:
    return report_context(record, where)
