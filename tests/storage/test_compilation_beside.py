"""The runtimes' compilation cache lives in the user's cache folder, which is also the default
result cache: a JAX run with any result cache must not make the default one refuse itself."""

import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage.cache import ResultCache, compilation_cache_dir


def test_the_folder_that_holds_the_compilation_cache_is_still_a_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGDIFF_COMPILATION_CACHE", str(tmp_path / "home"))
    compilation_cache_dir("jax").mkdir(parents=True)  # as a JAX child leaves it
    cache = ResultCache(tmp_path / "home")
    cache.claim()
    assert cache.is_marked


def test_a_folder_named_compiled_elsewhere_is_still_the_users(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGDIFF_COMPILATION_CACHE", str(tmp_path / "home"))
    (tmp_path / "project" / "compiled").mkdir(parents=True)
    with pytest.raises(InputError, match="holds other files"):
        ResultCache(tmp_path / "project").claim()
