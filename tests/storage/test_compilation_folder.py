"""The runtimes' compilation cache is the user's own: a compiled executable
runs as it is, so a folder another user owns or others can write to is not used, and each
model has a folder of its own, so one model's entry is never looked up for another."""

import os

import pytest

from segdiff_gui.storage.locations import compilation_cache_dir, compilation_cache_problem


@pytest.fixture
def base(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGDIFF_COMPILATION_CACHE", str(tmp_path / "base"))
    (tmp_path / "base").mkdir(mode=0o700)
    return tmp_path / "base"


def test_each_model_has_a_folder_of_its_own(base):
    a, b = compilation_cache_dir("jax", "a" * 64), compilation_cache_dir("jax", "b" * 64)
    assert a.parent == b.parent == base / "compiled" / "jax" and a != b
    assert a.name == "a" * 32
    assert compilation_cache_dir("jax") == base / "compiled" / "jax"


def test_the_users_own_folder_is_used_and_others_are_refused_in_one_line(base):
    folder = compilation_cache_dir("jax", "a" * 64)
    assert compilation_cache_problem(folder) == ""  # not made yet: nothing to say
    folder.mkdir(parents=True, mode=0o700)
    assert compilation_cache_problem(folder) == ""
    os.chmod(folder.parent, 0o777)  # any user could plant an executable in jax/
    said = compilation_cache_problem(folder)
    assert said == f"{folder.parent} can be written by other users (mode 777)"
    os.chmod(folder.parent, 0o755)
    moved = base / "elsewhere"
    folder.rename(moved)
    folder.symlink_to(moved)
    assert compilation_cache_problem(folder) == f"{folder} is a symbolic link"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_another_user_owns_is_refused(base):
    folder = compilation_cache_dir("jax", "a" * 64)
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, 12345, 12345)
    assert compilation_cache_problem(folder) == f"{folder} belongs to another user"


def test_a_shared_folder_above_is_fine_where_its_sticky_bit_protects_what_is_mine(tmp_path):
    """/tmp is writable by all, but its sticky bit keeps others from renaming what is not
    theirs: a cache below it in a folder of one's own is used; without the bit, refused."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    mine = shared / "mine"
    mine.mkdir(mode=0o700)
    assert compilation_cache_problem(mine) == ""
    os.chmod(shared, 0o777)
    assert compilation_cache_problem(mine) == f"{shared} can be written by other users (mode 777)"
