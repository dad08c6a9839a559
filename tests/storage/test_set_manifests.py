"""A sweep's test-set manifest: carried by its bundle, kept by a merge, read back as untrusted
data (a tampered bundle is refused whole; a damaged record in a cache costs only itself)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.shards import shard_slice
from segdiff_gui.core.test_sets import ShardManifest, set_coverage, set_identity
from segdiff_gui.storage import ResultCache, merge_bundle, write_bundle
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.set_manifests import cache_manifests, write_cache_manifest
from tests.factories import IMAGE_HASH, digest, make_record

MODEL = digest("m.keras")
# A set of 7 images, the record's own image (t.png) third.
HASHES = [digest(f"image {i}") for i in range(7)]
HASHES[2] = IMAGE_HASH
SET = set_identity(MODEL, HASHES)


def manifest(number: int, total: int, missing: tuple[str, ...] = ()) -> ShardManifest:
    part = range((number - 1) * 7 // total, number * 7 // total)
    names = ["t.png" if i == 2 else f"i{i}.png" for i in part]
    return ShardManifest(
        SET,
        MODEL,
        7,
        (number, total),
        tuple(zip(names, (HASHES[i] for i in part), strict=True)),
        missing,
    )


def test_a_sweeps_bundle_carries_its_manifest_and_a_merge_keeps_it(tmp_path):
    source = ResultCache(tmp_path / "source")
    record = make_record("m.keras", np.full((4, 4), 0.25, np.float32))
    source.write_run(record)
    shard = manifest(1, 3)
    write_bundle(source, [record.key], tmp_path / "b.h5", [shard])
    assert BundleReader(tmp_path / "b.h5").manifests == [shard]
    cache = ResultCache(tmp_path / "cache")
    assert merge_bundle(tmp_path / "b.h5", cache).manifests == [shard]
    assert cache_manifests(cache) == ([shard], [])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: "{not json", "is not valid JSON"),
        (lambda d: d, "is not a list of test-set records"),
        (lambda d: {**d, "shard": [4, 3]}, "its shard K is not a whole number from 1 to 3"),
        (lambda d: {**d, "images": d["images"][:1]}, "does not name the 2 images of shard 1/3"),
        (lambda d: {**d, "size": True}, "its set size is not a whole number"),
        (lambda d: {**d, "missing": ["../elsewhere.png"]}, "are not images of its shard"),
        (lambda d: {**d, "missing": [[1]]}, "are not images of its shard"),  # unhashable
        (lambda d: {**d, "runs": [1]}, "its runs are not a list of labels"),
        (lambda d: {**d, "set": "x" * 64}, "its set identity is not a SHA-256 digest"),
    ],
)
def test_a_tampered_manifest_refuses_the_bundle_naming_it_and_nothing_is_merged(
    tmp_path, change, problem
):
    source = ResultCache(tmp_path / "source")
    record = make_record("m.keras", np.full((4, 4), 0.25, np.float32))
    source.write_run(record)
    path = tmp_path / "b.h5"
    write_bundle(source, [record.key], path, [manifest(1, 3)])
    with h5py.File(path, "r+") as handle:
        (stored,) = json.loads(handle.attrs["test_sets"])
        changed = change(stored)
        if not isinstance(changed, str):  # the record changed, in its list (or alone)
            changed = json.dumps(changed if changed is stored else [changed])
        handle.attrs["test_sets"] = changed
    cache = ResultCache(tmp_path / "cache")
    with pytest.raises(InputError) as raised:
        merge_bundle(path, cache)
    assert str(raised.value.path) == str(path) and problem in raised.value.problem
    assert not cache.records() and cache_manifests(cache) == ([], [])


def test_a_damaged_record_in_a_cache_is_named_and_costs_only_itself(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    cache.claim()
    for number in (1, 2, 3):
        write_cache_manifest(cache, manifest(number, 3))
    folder = cache.root / "test-sets" / SET
    (folder / "2-of-3.json").write_text("{damaged")
    (folder / "3-of-3.json").rename(folder / "3-of-4.json")  # its name is another shard
    (folder / "1-of-4.json").symlink_to(folder / "1-of-3.json")
    os.mkfifo(folder / "2-of-4.json")  # opened, it is seen for what it is: no wait for a writer
    found, damaged = cache_manifests(cache)
    assert found == [manifest(1, 3)]
    problems = {Path(entry.path).name: entry.problem for entry in damaged}
    assert problems == {
        "1-of-4.json": "is a symbolic link, not a plain file",
        "2-of-4.json": "is not a plain file",
        "2-of-3.json": "is not a test-set record (not JSON text)",
        "3-of-4.json": "names another set or shard than the record it holds",
    }


def test_coverage_counts_images_across_shardings_and_names_whats_missing():
    summarised = [HASHES[i] for i in (0, 1, 3)]  # image 2 (t.png) of shard 1/3 has no runs
    (coverage,) = set_coverage([manifest(1, 3), manifest(1, 2)], MODEL, summarised)
    # Shard 1/2 covers images 0–2, shard 1/3 images 0–1: shard 2/2 (images 3–6) is missing.
    # Image 3 was swept, but no record says it is the set's: only 0 and 1 are known present.
    assert (coverage.size, coverage.present, coverage.absent) == (7, 2, ("t.png",))
    assert coverage.shards == 2 and coverage.missing_shards == ((2, 4),)
    assert not coverage.complete
    assert coverage.sentence() == (
        "Incomplete test set: 2 of 7 images (set " + SET[:8] + ", 2 shards); shard 2/2 "
        "(4 images) missing; 1 image of the shards present without runs (t.png)."
    )
    # Shards 1/2 and 3/3 of 16 leave images 8 and 9: one shard, two images, not eight.
    sixteen = [digest(f"16 {i}") for i in range(16)]

    def of_16(number: int, total: int) -> ShardManifest:
        part = range((number - 1) * 16 // total, number * 16 // total)
        pairs = tuple((f"{i}.png", sixteen[i]) for i in part)
        return ShardManifest(set_identity(MODEL, sixteen), MODEL, 16, (number, total), pairs)

    (mixed,) = set_coverage([of_16(1, 2), of_16(3, 3)], MODEL, sixteen)
    assert (mixed.present, mixed.missing_shards) == (14, ((2, 2),))
    assert "shard 2/2 (2 images) missing" in mixed.sentence()
    # Another model's set, or a set none of whose images were swept, is not this sweep's.
    assert set_coverage([manifest(1, 3)], digest("other"), summarised) == []
    assert set_coverage([manifest(3, 3)], MODEL, summarised) == []


def test_shards_cut_between_batches_are_counted_by_their_own_cut():
    """A sweep of 11 images whose largest batch is 4, in two shards: cut between batches
    (images 0–3 and 4–10, core/shards.shard_unit), the record says so, and the coverage
    counts it by that cut; a record whose cut cannot be is refused."""
    eleven = [digest(f"11 {i}") for i in range(11)]

    def of_11(number: int) -> ShardManifest:
        part = shard_slice(11, (number, 2), 4)
        pairs = tuple((f"{i}.png", eleven[i]) for i in part)
        return ShardManifest(set_identity(MODEL, eleven), MODEL, 11, (number, 2), pairs, unit=4)

    first = of_11(1)
    assert [name for name, _ in first.images] == ["0.png", "1.png", "2.png", "3.png"]
    assert ShardManifest.from_dict(first.to_dict()) == first
    (coverage,) = set_coverage([first], MODEL, eleven)
    assert (coverage.present, coverage.missing_shards) == (4, ((2, 7),))
    (whole,) = set_coverage([first, of_11(2)], MODEL, eleven)
    assert whole.complete
    uncut = {**of_11(2).to_dict(), "unit": 16}  # 11 images hold no two blocks of 16
    with pytest.raises(ValueError, match="cannot be cut at blocks of 16 images"):
        ShardManifest.from_dict(uncut)
    unit_1 = {**first.to_dict(), "unit": 1}  # shard 1/2 of 11 by one image is images 0–4
    with pytest.raises(ValueError, match="does not name the 5 images of shard 1/2"):
        ShardManifest.from_dict(unit_1)
