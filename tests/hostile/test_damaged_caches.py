"""Every damaged cache entry of the corpus, read in this process by the functions each command
reads a cache with: ``scan(with_maps=True)`` (``ls``, ``bundle``), ``read_source`` with
``analyses`` (``compare``, ``check``, ``report`` …, and the API's ``open_cache``),
``write_bundle`` of what reads back, and ``merge_bundle`` of a good copy (the repair). Each
must name the damaged file and what is wrong in one line, cost only that entry, and be
mended by a whole copy; a cache folder that is not one, or a marker that is not a plain file,
is refused before anything in it is touched.

How each front end shows such a line is tested once, in ``test_front_ends.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import InputError
from segdiff_gui.storage import ResultCache, merge_bundle, write_bundle
from segdiff_gui.storage.loading import analyses, read_source
from tests.hostile.corpus import CACHE_CASES, base_cache
from tests.hostile.expect import assert_one_line, bounded_memory, files_under

# A FIFO where a run or the marker belongs fails its case instead of blocking the run.
pytestmark = pytest.mark.timeout(60, method="thread")


def _bundle_of_all(cache: ResultCache, path: Path) -> Path:
    write_bundle(cache, cache.keys(), path)
    return path


@pytest.mark.parametrize("case", CACHE_CASES, ids=lambda case: case.name)
def test_a_damaged_cache_entry_costs_only_itself(case, tmp_path):
    cache, keys = base_cache(tmp_path / "cache")
    cache.claim()
    damaged = cache.run_path(keys[2])
    outside = tmp_path / "outside"
    outside.mkdir()
    case.craft(damaged, outside)

    with bounded_memory():
        listed = ResultCache(cache.root).scan(with_maps=True)  # ls, bundle
        source = read_source(ResultCache(cache.root), "", lambda damaged: None)  # compare, check
        studies = analyses(source, 0.5)
    assert [entry.path for entry in listed.damaged] == [str(damaged)]
    assert_one_line(listed.damaged[0], damaged, case.problem)
    assert sorted(record.label for record in listed.records) == ["cpu b1 r0", "cpu b1 r1"]
    assert source.damaged, "the damaged entry was read as if whole"
    assert_one_line(source.damaged[0], damaged, case.problem)
    assert "cpu b1 r1" in [run.label for run in studies[0].study.runs]
    # ``segdiff bundle`` writes what reads back whole.
    keys_read = [record.key for record in listed.records]
    assert write_bundle(cache, keys_read, tmp_path / "out.h5") == 2

    # A good bundle holding the same run repairs the damaged copy.
    good = _bundle_of_all(base_cache(tmp_path / "elsewhere")[0], tmp_path / "good.h5")
    if case.name == "a folder":  # whatever the user keeps in it is not segdiff's to delete
        with pytest.raises(InputError) as refused:
            merge_bundle(good, ResultCache(cache.root))
        assert_one_line(refused.value, damaged, "is a folder where a run belongs")
        return
    merged = merge_bundle(good, ResultCache(cache.root))
    assert merged.repaired == [keys[2]]
    assert not ResultCache(cache.root).scan(with_maps=True).damaged


def test_a_cache_folder_of_the_users_files_is_refused_and_left_alone(tmp_path, capsys, fake_engine):
    # The data-loss case: cleaning up after killed writers deleted every hidden *.tmp under
    # --cache (nested ones too), in any folder at all. Every command that writes a cache.
    folder = tmp_path / "home"
    (folder / "notes").mkdir(parents=True)
    for path in (folder / ".notes.tmp", folder / "notes" / ".draft.tmp"):
        path.write_text("the user's")
        os.utime(path, (0, 0))  # far older than an hour
    for command in (("demo",), ("merge", str(tmp_path / "none.h5")), ("devices",)):
        assert segdiff([*command, "--cache", str(folder)]) == 2, command
        assert f"{folder}: is not a segdiff cache" in capsys.readouterr().err
    assert (folder / ".notes.tmp").read_text() == "the user's"
    assert (folder / "notes" / ".draft.tmp").read_text() == "the user's"
    assert not (folder / ".segdiff-cache").exists()


def test_only_the_caches_own_temporaries_are_removed(tmp_path):
    cache, keys = base_cache(tmp_path / "cache")
    cache.claim()
    own = cache.run_path(keys[0]).with_name(f".{keys[0]}.h5.4242.0123abcd.tmp")
    lookalikes = [
        cache.root / ".notes.tmp",  # the cache's top folder is not where temporaries go
        cache.run_path(keys[0]).with_name(".notes.tmp"),  # not the exact name
        cache.root / "runs" / keys[0][:2] / "sub" / f".{keys[0]}.h5.1.0123abcd.tmp",  # nested
    ]
    for path in (own, *lookalikes):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        os.utime(path, (0, 0))
    assert cache.remove_stale_temporaries() == 1
    assert not own.exists() and all(path.exists() for path in lookalikes)


def test_a_folder_without_the_marker_is_no_cache_whatever_its_names(tmp_path):
    # Names a cache has (runs/, images/, probe/) do not make a folder one;
    # only the marker does. Refused in one line, and nothing in it touched.
    cache, _ = base_cache(tmp_path / "old")
    (cache.root / ".segdiff-cache").unlink()
    (cache.root / "probe").mkdir()
    before = files_under(cache.root)
    with pytest.raises(InputError) as refused:
        ResultCache(cache.root).claim()
    assert str(refused.value).startswith(
        f"{cache.root}: is not a segdiff cache: it holds other files (images, probe, runs)"
    )
    assert files_under(cache.root) == before and not ResultCache(cache.root).is_marked


@pytest.mark.parametrize("marker", ["a link to the user's file", "a FIFO", "a dangling link"])
def test_a_crafted_cache_marker_is_never_written_through_or_waited_on(tmp_path, marker):
    notes = tmp_path / "notes.txt"
    notes.write_text("the user's notes\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    if marker == "a FIFO":
        os.mkfifo(cache / ".segdiff-cache")
    else:
        (cache / ".segdiff-cache").symlink_to(notes if "user" in marker else tmp_path / "new")
    good = _bundle_of_all(base_cache(tmp_path / "source")[0], tmp_path / "good.h5")
    with pytest.raises(InputError, match="is not a segdiff cache marker"):
        merge_bundle(good, ResultCache(cache))  # a wait on the FIFO fails on the timeout
    assert notes.read_text() == "the user's notes\n" and not (tmp_path / "new").exists()


def test_a_bundle_target_with_an_odd_format_attribute_is_not_overwritten(tmp_path, capsys):
    cache, _ = base_cache(tmp_path / "cache")
    target = tmp_path / "t.h5"
    with h5py.File(target, "w") as handle:
        handle.attrs["format"] = np.array([1, 2])
    assert segdiff(["bundle", str(target), "--cache", str(cache.root)]) == 2
    assert f"{target}: exists and is not a segdiff bundle; not overwriting it" in (
        capsys.readouterr().err
    )
    with h5py.File(target) as handle:
        assert list(handle.attrs["format"]) == [1, 2]


def test_a_bundle_that_would_fill_the_disk_is_one_line(tmp_path):
    """A full disk: a small tmpfs where the test may mount one (CI runs as root)."""
    cache, keys = base_cache(tmp_path / "cache")
    bundle = _bundle_of_all(cache, tmp_path / "b.h5")
    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True
    )
    try:
        if mounted.returncode != 0:
            pytest.skip("cannot mount a small filesystem here")
        for write in (
            lambda: write_bundle(cache, keys, full / "b.h5"),
            lambda: merge_bundle(bundle, ResultCache(full / "cache")),
        ):
            with pytest.raises(InputError) as refused:
                write()
            assert "no space left on its disk" in str(refused.value)
            assert "\n" not in str(refused.value)
        assert not (full / "b.h5").exists()
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", str(full)], check=True)


def test_a_full_disk_while_writing_a_run_fails_cleanly(tmp_path):
    """The write itself failing (not the free-space check): a file size limit in a child."""
    script = f"""
import resource, signal, sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from segdiff_gui.storage import ResultCache
from tests.factories import make_record
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
cache = ResultCache({str(tmp_path / "cache")!r})
try:
    cache.write_run(make_record("m", np.random.default_rng(0).random((64, 64), np.float32)))
except Exception as error:
    print(type(error).__name__, error)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("InputError") and "cannot write on its disk" in result.stdout
    assert not list((tmp_path / "cache").rglob("*.h5*"))  # no temporary left behind


def test_damage_anywhere_in_a_runs_file_reads_whole_or_is_one_line(tmp_path):
    """A few bytes flipped in a run's object header made h5py raise a
    KeyError ("corrupt object header"), and a damaged member or attribute table a
    RuntimeError; every command said "internal error" (exit 3) and the window crashed at
    start. Stripes of flipped bytes across the whole file, one stripe at a time: each read
    gives the stored run bit for bit, or the one line that names the file."""
    cache, keys = base_cache(tmp_path / "cache")
    path = cache.run_path(keys[2])
    data = path.read_bytes()
    stored = cache.read_run(keys[2])
    assert stored.probabilities is not None
    said = set()
    for start in range(0, len(data), 47):
        damaged = bytearray(data)
        damaged[start : start + 64 : 7] = bytes(
            byte ^ 0xFF for byte in damaged[start : start + 64 : 7]
        )
        path.write_bytes(bytes(damaged))
        try:
            read = ResultCache(cache.root).read_run(keys[2])
        except InputError as error:
            assert_one_line(error, path, ".")
            said.add(type(error).__name__)
        else:
            assert read.probabilities is not None
            assert read.probabilities.tobytes() == stored.probabilities.tobytes()
            assert read.provenance == stored.provenance and read.key == stored.key
    assert said == {"UnreadableEntry"}


def test_reading_a_closed_file_is_segdiffs_own_mistake_not_damage(tmp_path):
    """The review: an error h5py raises once a file is closed (a reader used after its file
    was closed) was said as damage, and a good run taken for damaged is computed again over
    itself. It surfaces as the mistake it is."""
    from segdiff_gui.storage.hdf5_access import member_names, open_h5_for_reading

    cache, keys = base_cache(tmp_path / "cache")
    path = cache.run_path(keys[0])
    handle = open_h5_for_reading(path)
    root = handle["/"]
    assert "probabilities" in member_names(root, str(path))
    handle.close()
    with pytest.raises(Exception) as raised:
        member_names(root, str(path))
    assert not isinstance(raised.value, InputError), raised.value
