"""A test-set record is evidence only for runs that are present. A bundle
of a few kilobytes with no runs, and a record claiming the shard that was never run (naming
its images, or images of the shards merged), made ``merge`` say "all 3 shards merged" and
``sweep`` pass an incomplete set; a whole-set record with the set's id did the same; a record
claiming 10,000,000 shards made every later ``merge`` and ``sweep`` print a line of 179 MB.

Completeness is counted from the runs merged, a set's identity is checked against the images
its records name, and every size in a record is bounded: a forgery is one line (exit 2) where
it can be told at once, and never makes a partial set pass."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.limits import MAX_SHARDS
from segdiff_gui.core.shards import parse_shard
from segdiff_gui.core.test_sets import ShardManifest, set_coverage, set_identity
from segdiff_gui.storage import ResultCache, write_bundle
from tests.factories import digest, make_record
from tests.hostile.expect import bounded_memory, files_under

pytestmark = pytest.mark.timeout(60, method="thread")

HASHES = [digest(f"image {index}") for index in range(3)]
NAMES = ["a.png", "b.png", "c.png"]
MODEL = digest("m")  # make_record's model "m"
SET = set_identity(MODEL, HASHES)


def _shard(number: int, images: list[int] | None = None, **changes: object) -> ShardManifest:
    """Shard ``number`` of 3 of the set of three images (one image each), run at cpu b1."""
    chosen = [number - 1] if images is None else images
    fields = {
        "set_id": SET,
        "model_hash": MODEL,
        "size": 3,
        "shard": (number, 3),
        "images": tuple((NAMES[i], HASHES[i]) for i in chosen),
        "runs": ("cpu b1 r0",),
        **changes,
    }
    return ShardManifest(**fields)  # type: ignore[arg-type]


def _bundle_of_shard(folder: Path, number: int) -> Path:
    """What a shard's task bundles: its image's run and its record."""
    source = ResultCache(folder / f"task{number}")
    index = number - 1
    values = np.full((8, 8), 0.25 + 0.1 * index, np.float32)
    record = make_record("m", values, target_name=NAMES[index], target_hash=HASHES[index])
    source.write_run(record)
    source.write_image(HASHES[index], NAMES[index], np.zeros((8, 8), np.uint8))
    path = folder / f"shard-{number}-of-3.h5"
    write_bundle(source, [record.key], path, [_shard(number)])
    return path


def _forged(folder: Path, records: list[dict[str, object]]) -> Path:
    """A bundle of no runs that carries ``records`` as its test-set records."""
    path = folder / "forged.h5"
    write_bundle(ResultCache(folder / "empty"), [], path, [_shard(2)])
    with h5py.File(path, "r+") as handle:
        handle.attrs["test_sets"] = json.dumps(records)
    return path


def _said(capsys, *args: object) -> tuple[int, str, str]:
    code = segdiff([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def merged(tmp_path, capsys) -> Path:
    """A cache that holds shards 1/3 and 3/3: shard 2/3 (b.png) was never run."""
    cache = tmp_path / "merged"
    first, third = (_bundle_of_shard(tmp_path, number) for number in (1, 3))
    code, _, err = _said(capsys, "merge", first, third, "--cache", cache)
    assert code == 0 and "shard 2/3 (1 image) missing" in " ".join(err.split())
    return cache


@pytest.mark.parametrize(
    "images",
    [[1], [0]],
    ids=["the missing shard's own image", "an image of a shard merged"],
)
def test_a_record_without_runs_never_completes_a_set(merged, tmp_path, capsys, images):
    forged = _forged(tmp_path, [_shard(2, images).to_dict()])
    code, out, err = _said(capsys, "merge", forged, "--cache", merged)
    said = " ".join((out + err).split())
    assert "all 3 shards merged" not in said, said
    assert f"Incomplete test set: 2 of 3 images (set {SET[:8]}, 3 shards)" in said, said
    code, out, _ = _said(capsys, "sweep", "--cache", merged)
    assert code == 1, out  # a partial set never passes
    assert "Test set: 2 of 3 images (incomplete)" in " ".join(out.split())


@pytest.mark.parametrize(
    "whole",
    [
        {"size": 2, "images": [["a.png", HASHES[0]], ["c.png", HASHES[2]]]},
        {"size": 3, "images": [["a.png", HASHES[0]], ["b.png", HASHES[0]], ["c.png", HASHES[2]]]},
    ],
    ids=["the images present", "an image present twice"],
)
def test_a_whole_set_record_that_is_not_the_set_it_names_is_one_line(
    merged, tmp_path, capsys, whole
):
    record = {**_shard(1).to_dict(), "shard": [1, 1], **whole}
    forged = _forged(tmp_path, [record])
    before = files_under(merged)
    code, out, err = _said(capsys, "merge", forged, "--cache", merged)
    assert code == 2, out + err
    (line,) = err.splitlines()
    assert line.startswith(f"segdiff: {forged}: its test-set record is damaged: ")
    assert f"its images are not those of the set {SET[:8]} it names" in line
    assert files_under(merged) == before  # nothing merged, no record kept
    code, out, _ = _said(capsys, "sweep", "--cache", merged)
    assert code == 1 and "Test set: 2 of 3 images (incomplete)" in " ".join(out.split())


def test_a_record_of_ten_million_shards_is_one_line_and_never_kept(merged, tmp_path, capsys):
    images = [["a.png", HASHES[0]]]
    record = {**_shard(1).to_dict(), "size": 10_000_000, "shard": [1, 10_000_000], "images": images}
    forged = _forged(tmp_path, [record])
    before = files_under(merged)
    with bounded_memory(256 << 20):
        code, out, err = _said(capsys, "merge", forged, "--cache", merged)
    assert code == 2, out[:300] + err[:300]
    (line,) = err.splitlines()
    assert line.startswith(f"segdiff: {forged}: its test-set record is damaged: ")
    assert "its shard count N is not a whole number from 1 to 100,000" in line
    assert len(line) < 300
    assert files_under(merged) == before


def test_a_record_of_ten_million_shards_in_a_cache_is_one_line(merged, tmp_path, capsys):
    # Planted in the cache by an earlier version, or by hand: said, never expanded.
    images = [["a.png", HASHES[0]]]
    record = {**_shard(1).to_dict(), "size": 10_000_000, "shard": [1, 10_000_000], "images": images}
    planted = merged / "test-sets" / SET / "1-of-10000000.json"
    planted.write_text(json.dumps(record))
    with bounded_memory(256 << 20):
        code, out, err = _said(capsys, "sweep", "--cache", merged)
    assert code == 2 and len(out) + len(err) < 2000, (out[:300], err[:300])
    (line,) = err.splitlines()
    assert line.startswith(f"segdiff: {planted}: the test-set record is damaged: ")


def test_a_set_of_the_most_shards_is_said_in_one_short_line():
    """Within the bounds, a record of shard 1 of 100,000 is counted from its gaps, and its
    missing shards named in a few, never one by one."""
    size = MAX_SHARDS
    hashes = [digest(f"many {index}") for index in range(2)]
    record = ShardManifest(
        set_identity(MODEL, hashes), MODEL, size, (1, size), (("first.png", hashes[0]),)
    )
    with bounded_memory(256 << 20):
        (coverage,) = set_coverage([record], MODEL, [hashes[0]])
    assert coverage.present == 1 and not coverage.complete
    assert len(coverage.missing_shards) == size - 1
    sentence = coverage.sentence()
    assert len(sentence) < 300, sentence[:300]
    assert f"shards 2/{size}, 3/{size}, 4/{size}, 5/{size}, 6/{size} and 99,994 more" in sentence
    assert "(99,999 images) missing" in sentence


def test_a_shard_count_past_the_bound_is_refused_before_a_run():
    with pytest.raises(ConfigError, match="100,001 shards, over segdiff's bound of 100,000"):
        parse_shard("1/100001", {})
