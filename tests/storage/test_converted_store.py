"""Converted models in the cache: written aside, read back bit for bit, and refused as
damaged (never parsed by a runtime) when their bytes, digest or layout are not segdiff's."""

import os
import shutil

import h5py
import numpy as np
import pytest

from segdiff_gui.storage.converted import ConvertedModel, ConvertedStore, conversion_key
from segdiff_gui.storage.hdf5_access import UnreadableEntry

INGREDIENTS = {"model": "0" * 64, "runtime": "litert"}
KEY = conversion_key(INGREDIENTS)


@pytest.fixture
def store(tmp_path):
    store = ConvertedStore(tmp_path)
    store.write(ConvertedModel(INGREDIENTS, b"TFL3" + bytes(range(256)) * 40, {"bytes": 10244}))
    return store


def test_a_conversion_reads_back_bit_for_bit_with_its_facts(store):
    stored = store.read(KEY)
    assert stored.data == b"TFL3" + bytes(range(256)) * 40
    assert stored.facts == {"bytes": 10244}
    assert store.read(conversion_key({"model": "1" * 64})) is None
    assert not [p for p in store.path(KEY).parent.iterdir() if p.name.startswith(".")]


def test_keys_are_made_of_every_ingredient():
    other = conversion_key({"model": "0" * 64, "runtime": "litert-int8"})
    assert len({KEY, other}) == 2


def _rewrite(path, name, data, **options):
    with h5py.File(path, "a") as handle:
        del handle[name]
        handle.create_dataset(name, data=data, **options)


@pytest.mark.parametrize(
    "damage, said",
    [
        (
            lambda p: _rewrite(p, "artefact", np.zeros(10244, np.uint8)),
            "does not match its checksum",
        ),
        (
            lambda p: _rewrite(
                p, "artefact", np.zeros(10244, np.uint8), chunks=(1024,), compression="gzip"
            ),
            "holds an artefact segdiff did not write",
        ),
        (lambda p: _rewrite(p, "artefact", np.zeros(10244, np.float32)), "did not write"),
        (lambda p: h5py.File(p, "a").attrs.__setitem__("sha256", "x"), "not a SHA-256 digest"),
        (lambda p: h5py.File(p, "a").attrs.__setitem__("facts", "[1]"), "facts segdiff did not"),
        (lambda p: p.write_bytes(b"not hdf5"), "is not an HDF5 file"),
    ],
)
def test_a_damaged_conversion_is_refused_naming_the_file(store, damage, said):
    path = store.path(KEY)
    damage(path)
    with pytest.raises(UnreadableEntry, match=said) as refused:
        store.read(KEY)
    assert str(path) in str(refused.value)


def test_a_symlinked_conversion_is_not_followed(store, tmp_path):
    path = store.path(KEY)
    target = tmp_path / "elsewhere.h5"
    os.replace(path, target)
    path.symlink_to(target)
    with pytest.raises(UnreadableEntry):
        store.read(KEY)


def test_stale_temporaries_of_conversions_are_cleaned_and_nothing_else(cache):
    cache.claim()
    folder = cache.root / "converted" / KEY[:2]
    folder.mkdir(parents=True)
    stale = folder / f".{KEY}.h5.123.0123abcd.tmp"
    mine = folder / "notes.txt"
    for path in (stale, mine):
        path.write_bytes(b"x")
        os.utime(path, (1, 1))
    assert cache.remove_stale_temporaries() == 1
    assert not stale.exists() and mine.exists()


def test_another_models_artefact_copied_to_this_key_is_refused(store):
    """Model A's artefact at model B's key made B's run A's model. The
    file records what it was made from; its key is recomputed from that."""
    other = conversion_key({"model": "1" * 64, "runtime": "litert"})
    store.path(other).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(store.path(KEY), store.path(other))
    with pytest.raises(UnreadableEntry, match="holds another conversion than its name says"):
        store.read(other)
    assert store.read(KEY).ingredients == INGREDIENTS


def test_a_store_others_can_write_to_is_refused_as_the_compilation_cache_is(store, tmp_path):
    """A converted model runs as its artefact says; where anyone could
    have planted it, it is neither read nor kept (the runtime converts afresh)."""
    os.chmod(tmp_path, 0o700)  # the cache's root is the user's own
    assert store.refused(KEY) == store.refused() == ""
    os.chmod(store.path(KEY), 0o666)
    assert store.refused(KEY) == f"{store.path(KEY)} can be written by other users (mode 666)"
    assert store.refused() == ""  # the plan does not open every entry: the child says it
    os.chmod(store.path(KEY), 0o600)
    os.chmod(store.path(KEY).parent, 0o777)
    said = f"{store.path(KEY).parent} can be written by other users (mode 777)"
    assert store.refused(KEY) == store.refused() == said
    os.chmod(store.path(KEY).parent, 0o755)
    os.chmod(tmp_path, 0o1777)  # sticky or not, the cache's own folders are refused
    assert (
        store.refused(KEY)
        == store.refused()
        == f"{tmp_path} can be written by other users (mode 777)"
    )
