import multiprocessing
import os
import shutil
from dataclasses import replace

import h5py
import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.storage import ResultCache, merge_bundle, write_bundle
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.cache import UnreadableEntry, atomic_h5
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import expected_key
from tests.factories import IMAGE_HASH, bundle_of, digest, make_record, sealed


def awkward_values() -> np.ndarray:
    values = np.random.default_rng(0).random((300, 260), dtype=np.float32)
    values[0, :6] = [np.nan, -0.0, 1e-45, np.float32(0.549857), 1.0, np.inf]
    return values


def test_round_trip_is_bit_exact_with_provenance(cache):
    values = awkward_values()
    record = make_record("ab", values)
    cache.write_run(record)
    back = cache.read_run(record.key)
    assert back.probabilities.tobytes() == values.tobytes()
    assert back.provenance.environment == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert back.provenance.onednn_enabled is True and back.map_shape == (300, 260)
    with h5py.File(cache.run_path(record.key), "r") as handle:
        dataset = handle["probabilities"]
        assert dataset.compression == "gzip" and dataset.chunks is not None


def test_failed_write_leaves_nothing_behind(cache):
    target = cache.run_path("cd" * 32)
    with pytest.raises(RuntimeError), atomic_h5(target) as handle:
        handle.create_dataset("x", data=np.zeros(3))
        raise RuntimeError("killed mid-write")
    assert not target.exists() and list(target.parent.iterdir()) == []
    assert cache.keys() == []


def test_temporaries_of_killed_writers_are_ignored_and_cleaned(cache):
    cache.claim()
    record = make_record("ef", np.zeros((4, 4), np.float32))
    cache.write_run(record)
    stale = cache.run_path(record.key).with_name(f".{record.key}.h5.123.abcd0123.tmp")
    stale.write_bytes(b"\x89HDF truncated")
    os.utime(stale, (0, 0))
    assert cache.keys() == [record.key]
    assert cache.remove_stale_temporaries() == 1 and not stale.exists()


def _writer(root: str, worker: int) -> None:
    cache = ResultCache(root)
    for index in range(25):
        # Both workers write the shared keys too: last rename wins, both versions are whole.
        name = f"{index}" if index % 2 else f"{worker}-{index}"
        cache.write_run(make_record(name, np.full((64, 64), index, np.float32)))


def test_two_processes_writing_one_cache_do_not_corrupt_it(cache):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(cache.root), w)) for w in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    keys = cache.keys()
    assert len(keys) == 12 + 13 * 2
    for key in keys:
        record = cache.read_run(key)
        assert record.probabilities.shape == (64, 64)


def test_bundle_merge_round_trip_is_bit_exact(tmp_path):
    source, target = ResultCache(tmp_path / "gpu-server"), ResultCache(tmp_path / "laptop")
    values = awkward_values()
    first = make_record("01", values)
    second = make_record("02", values[::-1].copy(), label="cpu b64 r0")
    for record in (first, second):
        source.write_run(record)
    source.write_image(IMAGE_HASH, "t.png", np.arange(12, dtype=np.uint16).reshape(3, 4))
    bundle = tmp_path / "results.h5"
    assert write_bundle(source, [first.key, second.key], bundle) == 2
    reader = BundleReader(bundle)
    assert reader.read_run(first.key).probabilities.tobytes() == values.tobytes()
    result = merge_bundle(bundle, target)
    assert sorted(result.added) == sorted([first.key, second.key])
    for key in result.added:
        merged, original = target.read_run(key), source.read_run(key)
        provenance = merged.provenance.to_dict()
        assert provenance.pop("merged_from_bundle") == "results.h5"  # marked
        assert provenance.pop("merged_at")
        assert replace(merged, provenance=Provenance.from_dict(provenance)) == original
        assert merged.probabilities.tobytes() == original.probabilities.tobytes()
    assert np.array_equal(target.read_image(IMAGE_HASH), source.read_image(IMAGE_HASH))
    again = merge_bundle(bundle, target)
    assert again.added == [] and len(again.identical) == 2


def test_merge_reports_a_conflicting_nondeterministic_result(tmp_path):
    a, b = ResultCache(tmp_path / "a"), ResultCache(tmp_path / "b")
    ours = make_record("03", np.zeros((4, 4), np.float32))
    a.write_run(ours)
    b.write_run(make_record("03", np.full((4, 4), 1e-45, np.float32)))
    write_bundle(a, [ours.key], tmp_path / "a.h5")
    result = merge_bundle(tmp_path / "a.h5", b)
    assert result.conflicts == [ours.key] and result.added == []
    assert b.read_run(ours.key).probabilities[0, 0] == np.float32(1e-45)  # kept


def test_merge_keeps_another_machines_result_beside_ours(tmp_path):
    server, laptop = ResultCache(tmp_path / "server"), ResultCache(tmp_path / "laptop")
    theirs = make_record("06", np.zeros((4, 4), np.float32))
    theirs = replace(theirs, provenance=theirs.provenance.updated({"hostname": "gpu-server"}))
    server.write_run(theirs)
    laptop.write_run(make_record("06", np.full((4, 4), 1e-45, np.float32)))
    write_bundle(server, [theirs.key], tmp_path / "server.h5")
    result = merge_bundle(tmp_path / "server.h5", laptop)
    (elsewhere,) = result.from_other_machines
    assert result.added == [elsewhere] and len(laptop.keys()) == 2
    kept = laptop.read_run(elsewhere)
    assert kept.provenance.hostname == "gpu-server"
    assert kept.provenance.merged_from_key == theirs.key and kept.provenance.merged
    assert kept.label == "gpu-server: cpu b1 r0"
    assert merge_bundle(tmp_path / "server.h5", laptop).added == []  # merging twice: no copy


def test_a_plain_hdf5_file_is_not_a_bundle(tmp_path):
    from segdiff_gui.core.errors import InputError

    with h5py.File(tmp_path / "other.h5", "w") as handle:
        handle["x"] = 1
    with pytest.raises(InputError, match="not a segdiff bundle"):
        BundleReader(tmp_path / "other.h5")
    (tmp_path / "text.h5").write_text("nope")
    with pytest.raises(InputError, match="text.h5: is not an HDF5 file"):
        BundleReader(tmp_path / "text.h5")


def test_a_crafted_bundle_cannot_write_outside_the_cache(tmp_path):
    from segdiff_gui.core.errors import InputError

    record = make_record("04", np.zeros((4, 4), np.float32))
    bundle = bundle_of([record], tmp_path / "evil.h5", ResultCache(tmp_path / "source"))
    with h5py.File(bundle, "r+") as handle:
        handle["runs"][record.key].attrs["key"] = "../../../victim/model"
    with pytest.raises(InputError, match="attribute 'key' is not a SHA-256 digest"):
        merge_bundle(bundle, ResultCache(tmp_path / "target"))
    with pytest.raises(InputError, match="not a valid run key"):
        ResultCache(tmp_path / "target").run_path("../../../victim/model")
    assert not (tmp_path / "victim").exists()


def test_a_checked_map_is_handed_to_the_next_read_once(cache, monkeypatch):
    """Planning checks every cached map whole, then the window or the report reads it: the
    map the check read is handed on (once), and a file replaced in between is read anew."""
    import segdiff_gui.storage.cache as cache_module

    values = awkward_values()
    record = make_record("m", values)
    cache.write_run(record)
    reads = []
    real = cache_module.with_checked_map
    monkeypatch.setattr(cache_module, "with_checked_map", lambda *a: reads.append(a[2]) or real(*a))
    kept, problem = cache.checked(record.key)
    assert problem is None and kept is not None and kept.probabilities is None
    assert len(reads) == 1
    handed = cache.read_run(record.key)
    assert len(reads) == 1  # not read again
    assert handed.probabilities.tobytes() == values.tobytes()
    cache.read_run(record.key)
    assert len(reads) == 2  # handed on once only: the next read reads the file

    cache.checked(record.key)
    other = values.copy()
    other[0, 0] = np.float32(0.25)
    cache.write_run(replace(record, probabilities=other))  # a new file (renamed into place)
    assert cache.read_run(record.key).probabilities[0, 0] == np.float32(0.25)


def test_an_imported_map_must_be_the_map_its_key_was_made_from(tmp_path):
    """An imported run is keyed by its map's digest; a file whose map was swapped
    for another (checksum and key made consistent again) is refused, naming the file."""
    from segdiff_gui.core.hashing import imported_map_digest

    cache = ResultCache(tmp_path / "cache")
    mine = np.full((6, 5), 0.25, dtype=np.float32)
    stated = {"map_sha256": imported_map_digest(mine), "label": "colab", "notes": {}}
    record = sealed(make_record("m", mine), provenance=Provenance.from_dict({"imported": stated}))
    cache.write_run(record)
    back = cache.read_run(record.key)
    assert back.label == "imported: colab r0" and back.probabilities.tobytes() == mine.tobytes()
    swapped = sealed(
        make_record("m", mine + np.float32(0.5)),
        provenance=Provenance.from_dict({"imported": stated}),
    )
    assert swapped.key == record.key  # the same stated digest: the same key
    cache.write_run(swapped)
    with pytest.raises(InputError, match="imported map does not match its recorded digest"):
        cache.read_run(record.key)


def test_a_cache_that_cannot_be_written_is_said_before_anything_is_computed(tmp_path):
    """A read-only cache computed the whole run and then failed each run with
    ``OSError: [Errno 30]``. The planner says it in one line before any child starts: the
    runs it lacks get no job, each is planned as unstorable for that reason (not the
    whole request refused, its cached runs too), and the image is not written."""
    from segdiff_gui.resources import demo_images, demo_model
    from segdiff_gui.runner import plan_matrix
    from tests.conftest import mounted_read_only

    root = tmp_path / "cache"
    ResultCache(root).claim()
    with mounted_read_only(root):
        plan = plan_matrix(demo_model(), demo_images()[:1], [RunConfig()],
                           cache=ResultCache(root), repeats=1)  # fmt: skip
        text = str(plan.unwritable)
        assert text.startswith(f"{root}: cannot be written") and "\n" not in text
        assert "choose another cache folder" in text
        assert plan.jobs == () and plan.unstorable == plan.runs and plan.cached == ()
        assert not (root / "images").exists() or not any((root / "images").iterdir())


def test_a_sweeps_short_batch_and_its_targets_place_are_stored_keyed_and_checked(tmp_path):
    """A sweep's last batch is the set's remainder (2 images under batch 8) and its target
    sits second: both are read back as written, in the key, and a record whose place does
    not hold its target, or whose batch is longer than its configuration's, is damage."""
    cache = ResultCache(tmp_path)
    values = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    other = digest("the image before it")
    base = sealed(make_record("m", values, "cpu b8 r0"))
    swept = replace(
        base,
        batch_hashes=[other, IMAGE_HASH],
        batch_names=["s.png", "t.png"],
        raw_output_shape=[2, 4, 4, 1],
        batch_position=1,
    )
    swept = replace(swept, key=expected_key(swept))
    assert swept.key != expected_key(replace(swept, batch_position=None))  # keyed
    cache.write_run(swept)
    back = cache.read_run(swept.key)
    assert (back.batch_position, back.position, back.batch_hashes) == (1, 1, [other, IMAGE_HASH])
    assert np.array_equal(back.probabilities, values)

    def damaged(**changes) -> str:
        record = replace(swept, **changes)
        record = replace(record, key=expected_key(record))
        cache.write_run(record)
        path = cache.run_path(record.key)
        with pytest.raises(UnreadableEntry) as raised:
            ResultCache(tmp_path).read_run(record.key)
        path.unlink()
        return raised.value.problem

    assert "does not hold the target at its position" in damaged(batch_position=0)
    assert "is not a list of 1 to 8 SHA-256 digests" in damaged(
        batch_hashes=[other] * 8 + [IMAGE_HASH], batch_names=["s.png"] * 9,
        raw_output_shape=[9, 4, 4, 1],
    )  # fmt: skip
    assert "outside 0..7" in damaged(batch_position=8)


@pytest.mark.parametrize("when", ["before the write", "between its free-space check and open"])
def test_a_runs_folder_removed_since_the_last_write_is_made_again(tmp_path, monkeypatch, when):
    """A process makes each folder once (a sweep writes thousands of runs): one removed
    since (the cache cleared while the window stays open) is made again, not said full."""
    cache = ResultCache(tmp_path / "cache")
    record = make_record("m", np.linspace(0, 1, 30, dtype=np.float32).reshape(6, 5))
    written = cache.write_run(record)
    if when == "before the write":
        shutil.rmtree(tmp_path / "cache")
    else:
        real = shutil.disk_usage

        def checked_then_removed(folder):
            monkeypatch.setattr(shutil, "disk_usage", real)
            answer = real(folder)
            shutil.rmtree(tmp_path / "cache")
            return answer

        monkeypatch.setattr(shutil, "disk_usage", checked_then_removed)
    assert cache.write_run(record).key == written.key
    assert cache.read_run(written.key).probabilities.shape == (6, 5)
