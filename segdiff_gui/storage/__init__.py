"""h5py: the result cache, run records with provenance, and portable bundles."""

from segdiff_gui.storage.bundle import BundleReader, MergeResult, merge_bundle, write_bundle
from segdiff_gui.storage.cache import ResultCache, default_cache_dir
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_run, select_runs

__all__ = [
    "BundleReader",
    "MergeResult",
    "Provenance",
    "ResultCache",
    "RunRecord",
    "default_cache_dir",
    "merge_bundle",
    "select_run",
    "select_runs",
    "write_bundle",
]
