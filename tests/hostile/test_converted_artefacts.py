"""A converted model in the cache is derived data that a runtime runs as it is.
One that its runtime cannot open, checksum and key right, was never
replaced under LiteRT (every later run failed with "The model is not a valid Flatbuffer
buffer", naming no file) while ONNX Runtime's was converted again: every converted runtime
now converts it again and replaces it. And an artefact in a folder that others can write to
was used: artefacts are held to the compilation cache's rule, neither read nor kept there,
and the plan says so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from segdiff_gui.resources import demo_dir, demo_model
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.converted import ConvertedModel, ConvertedStore
from tests.conftest import segdiff

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600, method="thread")]

RUNTIMES = ("litert", "onnxruntime")


def _run(cache: Path, *specs: str) -> tuple[list[dict[str, object]], str]:
    """``segdiff run --json`` of ``specs`` on one demo image: its runs and its stderr."""
    image = sorted((demo_dir() / "images").iterdir())[0]
    configs = [word for spec in specs for word in ("--config", spec)]
    result = segdiff(
        "run", demo_model(), image, *configs, "--repeats", "1", "--cache", cache, "--json",
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["runs"], result.stderr


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding each runtime's artefact of the demo model and a run of it."""
    root = tmp_path_factory.mktemp("converted") / "cache"
    _run(root, *(f"runtime={name}" for name in RUNTIMES))
    return root


def _copy(source: Path, folder: Path) -> tuple[ResultCache, ConvertedStore]:
    import shutil

    root = shutil.copytree(source, folder / "cache")
    return ResultCache(root), ConvertedStore(root)


def _artefacts(store: ConvertedStore) -> dict[str, ConvertedModel]:
    read = (store.read(path.stem) for path in store.root.glob("*/*.h5"))
    return {converted.ingredients["runtime"]: converted for converted in read if converted}


def _map(cache: ResultCache, runtime: str) -> bytes:
    """The map of the one run of ``runtime`` in ``cache``."""
    (key,) = [
        k for k in cache.keys() if cache.read_run(k, with_map=False).run_config.runtime == runtime
    ]
    return cache.read_run(key).probabilities.tobytes()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_artefact_its_runtime_cannot_open_is_converted_again_and_replaced(
    runtime, converted, tmp_path
):
    cache, store = _copy(converted, tmp_path)
    good = _artefacts(store)[runtime]
    before = _map(cache, runtime)
    # Bytes no runtime reads, stored at the right key with the right checksum.
    planted = b"\x1c\0\0\0TFL3" + b"\0" * 4096
    store.write(ConvertedModel(good.ingredients, planted, good.facts))
    (run,), _ = _run(cache.root, f"runtime={runtime},threads=1")
    provenance = cache.read_run(str(run["key"])).provenance.to_dict()
    assert run["status"] == "finished" and provenance["conversion_reused"] is False
    assert cache.read_run(str(run["key"])).probabilities.tobytes() == before
    again = store.read(good.key)  # replaced by the converter's own again
    assert again is not None and again.data != planted


def test_an_artefact_in_a_folder_others_can_write_to_is_neither_used_nor_kept(converted, tmp_path):
    cache, store = _copy(converted, tmp_path)
    planted = store.path(_artefacts(store)["litert"].key)
    os.chmod(planted.parent, 0o777)  # anyone could have put this artefact there
    kept = planted.read_bytes(), planted.stat().st_mtime_ns
    before = _map(cache, "litert")
    (run,), said = _run(cache.root, "runtime=litert,threads=1")
    provenance = cache.read_run(str(run["key"])).provenance.to_dict()
    assert run["status"] == "finished" and provenance["conversion_reused"] is False
    problem = f"{planted.parent} can be written by other users (mode 777)"
    assert provenance["conversion_store_refused"] == problem
    assert f"converted models are not kept: {problem}; the model is converted afresh" in said
    assert (planted.read_bytes(), planted.stat().st_mtime_ns) == kept  # not written there
    assert cache.read_run(str(run["key"])).probabilities.tobytes() == before
