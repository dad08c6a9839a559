"""Where test-set manifests (core/test_sets.py) are kept: as an attribute of a bundle (the
shard of the sweep that wrote it, or the manifests a cache's bundle carries on), and, once
merged, as one small JSON file per shard in the cache (``test-sets/<set>/<K>-of-<N>.json``).
Both are read as untrusted data: bounded, every field checked, a file whose name disagrees
with its content refused."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.limits import MAX_TEXT_BYTES
from segdiff_gui.core.test_sets import ShardManifest
from segdiff_gui.storage.cache import SETS_FOLDER, ResultCache, write_file_aside
from segdiff_gui.storage.hdf5_access import UnreadableEntry
from segdiff_gui.storage.schema import AttributeReader
from segdiff_gui.storage.small_files import read_small_file

__all__ = [
    "MANIFEST_ATTRIBUTE",
    "cache_manifests",
    "manifests_text",
    "read_manifest_attribute",
    "write_cache_manifest",
]

MANIFEST_ATTRIBUTE = "test_sets"  # a bundle's: the manifests of the shards its runs are
_FILE = re.compile(r"^([1-9][0-9]{0,7})-of-([1-9][0-9]{0,7})\.json$")
_SET = re.compile(r"^[0-9a-f]{64}$")


def _manifest_text(manifest: ShardManifest, where: str | Path) -> str:
    """One manifest as a cache keeps it, within the bound of one record."""
    return _bounded(
        canonical_json(manifest.to_dict()), where,
        f"shard {manifest.shard_text} names {len(manifest.images):,} images, too many for its "
        "test-set record (1 MB); cut the set into more shards",
    )  # fmt: skip


def manifests_text(manifests: Sequence[ShardManifest], where: str | Path) -> str:
    """A bundle's manifests as it keeps them, within the bound of one record."""
    return _bounded(
        canonical_json([m.to_dict() for m in manifests]), where,
        "would carry test-set records of over 1 MB; bundle the runs of fewer shards",
    )  # fmt: skip


def _bounded(text: str, where: str | Path, too_large: str) -> str:
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise InputError(where, too_large)
    return text


def _checked(value: object, where: str | Path, what: str) -> ShardManifest:
    try:
        return ShardManifest.from_dict(value)
    except (TypeError, ValueError) as error:  # a crafted record, whatever its shape
        raise UnreadableEntry(str(where), f"{what} is damaged: {error}") from None


def read_manifest_attribute(attrs: AttributeReader) -> list[ShardManifest]:
    """A bundle's manifests (none for a bundle of runs that belong to no recorded sweep)."""
    if MANIFEST_ATTRIBUTE not in attrs.names():
        return []
    value = attrs.json(MANIFEST_ATTRIBUTE)
    if not isinstance(value, list):
        raise attrs.fail(MANIFEST_ATTRIBUTE, "is not a list of test-set records")
    return [_checked(item, attrs.where, "its test-set record") for item in value]


def _path(cache: ResultCache, manifest: ShardManifest) -> Path:
    number, total = manifest.shard
    return cache.root / SETS_FOLDER / manifest.set_id / f"{number}-of-{total}.json"


def write_cache_manifest(cache: ResultCache, manifest: ShardManifest) -> None:
    """Keep a merged bundle's manifest in ``cache`` (replacing that shard's earlier one)."""
    path = _path(cache, manifest)
    write_file_aside(path, _manifest_text(manifest, path).encode())


def _read(path: Path) -> ShardManifest:
    data = read_small_file(path, MAX_TEXT_BYTES)
    try:
        value = json.loads(data.decode("utf-8"))
        # "\\udcff" escapes decode to lone surrogates, which no writer can encode again.
        json.dumps(value, ensure_ascii=False).encode()
    except (UnicodeError, ValueError, RecursionError):
        raise UnreadableEntry(str(path), "is not a test-set record (not JSON text)") from None
    manifest = _checked(value, path, "the test-set record")
    if path.parent.name != manifest.set_id or path.name != (
        f"{manifest.shard[0]}-of-{manifest.shard[1]}.json"
    ):
        raise UnreadableEntry(str(path), "names another set or shard than the record it holds")
    return manifest


def cache_manifests(cache: ResultCache) -> tuple[list[ShardManifest], list[UnreadableEntry]]:
    """Every manifest merged into ``cache``, and why each other file there cannot be used."""
    found: list[ShardManifest] = []
    damaged: list[UnreadableEntry] = []
    folder = cache.root / SETS_FOLDER
    if not folder.is_dir() or folder.is_symlink():
        return found, damaged
    for set_folder in sorted(folder.iterdir()):
        if not _SET.match(set_folder.name) or set_folder.is_symlink() or not set_folder.is_dir():
            continue  # not one segdiff writes (a temporary, say)
        for path in sorted(set_folder.iterdir()):
            if _FILE.match(path.name):
                try:
                    found.append(_read(path))
                except UnreadableEntry as error:
                    damaged.append(error)
    return found, damaged
