"""Shared fixtures: a fresh cache per test, the demo, test models in every format, and a way to
run the real ``segdiff`` command line in a subprocess."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest
from filelock import FileLock
from PIL import Image

from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.storage import ResultCache

TESTS = Path(__file__).parent


def made_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """A folder ``make`` fills, made once for the whole run: under pytest-xdist the first
    worker to ask makes it and the others wait for it (a session fixture is otherwise made in
    every worker: a TensorFlow child each). Readers only: a test that changes it copies it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(shared / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed part-way
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(autouse=True)
def piped_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line lays its tables out for $COLUMNS where set (cli/main.py), and
    pytest-xdist sets it to 80 in its workers: every test sees piped output's own width (160)
    unless it sets one."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def cache(tmp_path: Path) -> ResultCache:
    return ResultCache(tmp_path / "cache")


@pytest.fixture(scope="session")
def demo() -> tuple[Path, list[Path]]:
    return demo_model(), demo_images()


@pytest.fixture(scope="session")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's artefacts (tests/engine/artefact_files.py), converted once per session in a
    process of its own."""

    def write(out: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "tests.engine.artefact_files", str(out)],
            check=True,
            capture_output=True,
            timeout=600,
            cwd=TESTS.parent,
        )

    return made_once(tmp_path_factory, "artefacts", write)


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Test models written by real Keras 3 and tf-keras in a child process."""

    def write(out: Path) -> None:
        subprocess.run(
            [sys.executable, str(TESTS / "fixtures_models.py"), str(out)],
            check=True,
            capture_output=True,
            timeout=300,
        )

    return made_once(tmp_path_factory, "models", write)


@pytest.fixture(scope="session")
def small_images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four 32×32 grayscale PNGs for the tiny test models."""
    out = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(3)
    paths = []
    for index in range(4):
        path = out / f"small_{index}.png"
        Image.fromarray(rng.integers(0, 256, (32, 32), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory: pytest.TempPathFactory) -> ResultCache:
    """The demo's matrix, two repeats each, computed once for every test that reads it."""

    def compute(root: Path) -> None:
        result = segdiff("demo", "--cache", root, "--repeats", "2")
        assert result.returncode == 0, result.stderr

    return ResultCache(made_once(tmp_path_factory, "demo-cache", compute))


@pytest.fixture(scope="session")
def softmax_cache(
    models: Path, small_images: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> ResultCache:
    """The tiny three-class model (``softmax3.keras``) on the first small image at batch 1 and
    in bfloat16, and at batch 2 (filled with the second image), computed once for every test
    that reads it, by a real TensorFlow child. Readers only: a test that changes it copies it."""

    def compute(root: Path) -> None:
        result = segdiff(
            "run", models / "softmax3.keras", *small_images[:2], "--config", "batch=1",
            "--config", "precision=mixed_bfloat16", "--config", "batch=2", "--repeats", "1",
            "--cache", root,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    return ResultCache(made_once(tmp_path_factory, "softmax-cache", compute))


def run_keys(cache: ResultCache) -> dict[str, str]:
    """Each run's key in ``cache``, by its label."""
    return {cache.read_run(key, with_map=False).label: key for key in cache.keys()}


def copy_runs(source: ResultCache, root: Path, keys: set[str]) -> ResultCache:
    """A cache at ``root`` holding only the runs ``keys`` of ``source`` (and whatever else
    ``source`` keeps beside its runs): a test that asks for them again is served from it and
    starts no child for them."""

    def runs_folder(folder: str, names: list[str]) -> list[str]:
        return names if Path(folder) == source.root / "runs" else []

    cache = ResultCache(shutil.copytree(source.root, root, ignore=runs_folder))
    for key in keys:
        cache.run_path(key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source.run_path(key), cache.run_path(key))
    return cache


def copy_labelled(source: ResultCache, root: Path, labels: set[str]) -> ResultCache:
    """A cache at ``root`` holding only the runs of ``source`` labelled ``labels`` (each
    computed by ``source``'s real child). Every label must be there."""
    keys = {key for label, key in run_keys(source).items() if label in labels}
    assert len(keys) == len(labels), f"{source.root} lacks some of {sorted(labels)}"
    return copy_runs(source, root, keys)


@contextlib.contextmanager
def mounted_read_only(root: Path) -> Iterator[None]:
    """``root`` read-only for the block: bind-mounted so as root (who writes through
    permissions; the test is skipped where mounting is not allowed), else its mode."""
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(root), str(root)],
                                 capture_output=True)  # fmt: skip
        if mounted.returncode != 0:
            pytest.skip("no read-only mount here (needs CAP_SYS_ADMIN)")
    else:
        os.chmod(root, 0o555)
    try:
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(root)], check=False)
        else:
            os.chmod(root, 0o755)


def read_only(monkeypatch: pytest.MonkeyPatch, cache: ResultCache) -> None:
    """``cache`` can no longer be written, as on a read-only mount (which needs privileges
    CI lacks): making a file in its folder fails with EROFS. Its runs still read."""
    import errno
    import tempfile

    from segdiff_gui.storage import cache as cache_module

    real = tempfile.mkstemp

    def mkstemp(*args: object, dir: str | Path | None = None, **kwargs: object) -> object:
        if dir is not None and Path(dir) == cache.root:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
        return real(*args, dir=dir, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(cache_module.tempfile, "mkstemp", mkstemp)


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine children started by this test process are the fake engine (tests/fake_engine.py:
    the real protocol and storage, synthetic maps, no runtime imported)."""
    from segdiff_gui.runner import child
    from tests.fake_engine import engine_command

    monkeypatch.setattr(child, "engine_command", engine_command)


@pytest.fixture
def engine_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The words (``run``, ``probe jax``…) of every engine child this test process starts,
    in order; the children are the real ones, started as ever."""
    from segdiff_gui.runner import child

    started: list[str] = []
    real = child.engine_command

    def counted(words: str) -> list[str]:
        started.append(words)
        return real(words)

    monkeypatch.setattr(child, "engine_command", counted)
    return started


class _PoolThatHoldsOn(ThreadPoolExecutor):
    """A pool that holds on to everything it is handed until it is shut down. A pool thread
    lets go of a task only after handing over its result, often once the caller has moved on:
    whatever is still alive once the caller has let go of it is held by the pool, and would
    have been let go of in a pool thread."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.held: list[object] = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.held.append((fn, args, kwargs))
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def pool_that_holds_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[_PoolThatHoldsOn]:
    """thread_map's shared pool, for this test, one that holds on to all it was handed (see
    _PoolThatHoldsOn), on a machine of two cores; let go of afterwards, in this thread."""
    from segdiff_gui.core import parallel

    pool = _PoolThatHoldsOn()
    monkeypatch.setattr(parallel, "_cores", lambda: 2)
    monkeypatch.setattr(parallel, "_pool", pool)
    yield pool
    pool.shutdown(wait=True)
    pool.held.clear()


@pytest.fixture
def exact_cache(
    demo: tuple[Path, list[Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_engine: None,
) -> Path:
    """The demo's first image run as cpu, bfloat16 and the exact run (precision=float64)
    by the fake engine: its exact map is float64, the reference's that map nearly rounded
    (a configuration away from the defaults moves some pixels by a few ULPs)."""
    model, images = demo
    cache = tmp_path / "exact"
    result = segdiff_here(
        capsys, "run", model, images[0], "--cache", cache, "--repeats", "1",
        "--config", "batch=1", "--config", "precision=mixed_bfloat16",
        "--config", "precision=float64",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Exact: cpu b1 fp64 r0, the model in float64" in result.stdout
    return cache


@pytest.fixture(scope="session")
def fake_demo_cache(tmp_path_factory: pytest.TempPathFactory) -> ResultCache:
    """The demo's matrix, two repeats each, computed by the fake engine (synthetic maps, in a
    second): for tests of what is shown of a cache, not of what the model computes."""

    def compute(root: Path) -> None:
        result = segdiff("demo", "--cache", root, "--repeats", "2", fake=True)
        assert result.returncode == 0, result.stderr

    return ResultCache(made_once(tmp_path_factory, "fake-demo-cache", compute))


def segdiff(
    *args: str | Path,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    cwd: Path | None = None,
    fake: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``segdiff`` command line (``python -m segdiff_gui.cli``), in ``cwd``;
    ``fake``: its engine children are the fake engine (tests/fake_engine.py)."""
    start = [str(TESTS / "fake_engine.py"), "cli"] if fake else ["-m", "segdiff_gui.cli"]
    return subprocess.run(
        [sys.executable, *start, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def segdiff_here(
    capsys: pytest.CaptureFixture[str], *args: object
) -> subprocess.CompletedProcess[str]:
    """``segdiff ARGS`` run by the command line's ``main`` in this process, answered as the
    subprocess it stands for (:func:`segdiff`): the same exit code, standard output and standard
    error, without a second of Python start-up. Its engine children are still processes of
    their own (real ones, or the fake engine's by the ``fake_engine`` fixture), so TensorFlow
    never enters this process."""
    from segdiff_gui.cli.main import main

    capsys.readouterr()  # what the test printed before is not this command's
    try:
        code = main([str(arg) for arg in args])
    except SystemExit as exit_:  # argparse's usage errors: exit code 2, its message on stderr
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([str(arg) for arg in args], code, out, err)


def engine_children(pid: int | None = None) -> list[psutil.Process]:
    """The live engine children below ``pid`` (default: this process). A zombie (a child that
    exited and is not reaped yet, perhaps another test's) runs nothing and is left out: its
    command line can no longer be read."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            command = " ".join(process.cmdline())
            fake = any(f"fake_engine.py {word}" in command for word in ("run", "probe", "inspect"))
            engine = "segdiff_gui.engine" in command or fake
            if process.status() != psutil.STATUS_ZOMBIE and engine:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return found
