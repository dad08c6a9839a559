import errno
import json
import os

import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage import ResultCache


def test_a_full_disk_while_a_cache_is_made_leaves_nothing_and_the_next_run_claims_it(
    tmp_path, monkeypatch
):
    cache = ResultCache(tmp_path / "new" / "cache")
    real_write = os.write
    failures = []

    def full_once(descriptor, data):
        if not failures:
            failures.append(descriptor)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", full_once)
    with pytest.raises(InputError, match=r"cache: cannot be made a cache") as refused:
        cache.claim()
    assert "no space left" in str(refused.value).lower()
    assert failures and not (tmp_path / "new").exists()  # nothing half-made
    cache.claim()  # room again
    assert cache.is_marked


@pytest.mark.parametrize("left", [b"", b'{"format": "segdiff-c'])
def test_a_marker_a_failed_creation_left_unfinished_is_finished_by_the_next_run(tmp_path, left):
    cache = ResultCache(tmp_path / "cache")
    cache.root.mkdir()
    (cache.root / ".segdiff-cache").write_bytes(left)
    cache.claim()
    assert cache.is_marked
    assert json.loads((cache.root / ".segdiff-cache").read_text())["format"] == "segdiff-cache"
    assert sorted(p.name for p in cache.root.iterdir()) == [".segdiff-cache"]


def test_a_marker_of_other_content_is_still_refused_and_left_alone(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    cache.root.mkdir()
    (cache.root / ".segdiff-cache").write_bytes(b"my own notes\n")
    with pytest.raises(InputError, match="is not a segdiff cache marker"):
        cache.claim()
    assert (cache.root / ".segdiff-cache").read_bytes() == b"my own notes\n"


def test_a_killed_claims_temporary_does_not_block_the_next(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    cache.root.mkdir()
    left = cache.root / ".segdiff-cache.4242.0123abcd.tmp"
    left.write_bytes(b"")
    cache.claim()
    assert cache.is_marked
    # Housekeeping removes it once it is old enough not to be a live claim's, by its exact
    # name only: a file of the user's is left alone.
    mine = cache.root / ".segdiff-cache.mine.tmp"
    mine.write_bytes(b"")
    assert cache.remove_stale_temporaries() == 0 and left.exists()
    os.utime(left, (0, 0))
    os.utime(mine, (0, 0))
    assert cache.remove_stale_temporaries() == 1
    assert not left.exists() and mine.exists()
