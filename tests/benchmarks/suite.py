"""segdiff's benchmark suite: every figure next to its target, with a pass/short mark.

Run: ``python -m tests.benchmarks [--json FILE] [--only NAME ...]`` (not part of the test
run). Figures are medians over several runs. A speed target is a ratio to a floor measured in
the same run, in turn with it (``against_floor``, ``alternating``): each floor is a short
script beside this one (``plain_tf.py``, ``plain_window.py``, ``plain_hit.py``,
``plain_large.py``), as plainly as a user would write it; the absolute times are printed beside
the ratios for reading, never as the pass mark.
Benchmarks: startup, fresh_demo (a new cache's first map and all ten demo runs, against a
hand-written script's first map), engine (overhead and cache hit), interaction, bandwidth,
scale, matrix, runtimes (each runtime's first map, cold and with its compilation cache),
layers (the layer probe's memory and time on a deep model at 512×512), conversions (LiteRT's
and ONNX Runtime's conversion and inference times on the demo), artefacts (a user's own
``.tflite``, ``.onnx`` and IR: the first map against a plain script running the file), exact
(the float64 reference's time against float32's, and float32's distance from it), api (the
Python API's cache hit and answers).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tests.benchmarks.synthetic import maps, record

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BIN = Path(PYTHON).parent


@dataclass
class Figure:
    benchmark: str
    what: str
    value: float
    unit: str
    target: str
    passed: bool
    # A ratio to a floor measured in the same run: both sides, in seconds, for reading.
    ours: float | None = None
    floor: float | None = None


def against_floor(
    benchmark: str, what: str, ours: float, floor: float, limit: float, floor_name: str
) -> Figure:
    """``ours / floor`` with its target ``≤ limit``: the pass mark of a speed figure (an
    absolute time moves by a third on a shared machine; a ratio measured in one run does not)."""
    ratio = ours / floor
    return Figure(benchmark, f"{what} / {floor_name}", ratio, "×", f"≤ {limit:g}×",
                  ratio <= limit, ours, floor)  # fmt: skip


def median_of(action: Callable[[], float], repeats: int) -> float:
    return statistics.median(action() for _ in range(repeats))


def alternating(
    first: Callable[[], float], second: Callable[[], float], pairs: int
) -> tuple[float, float]:
    """The medians of ``first`` and ``second`` measured in turn, ``pairs`` times each: a load
    that comes and goes falls on both sides alike."""
    ones, others = [], []
    for _ in range(pairs):
        ones.append(first())
        others.append(second())
    return statistics.median(ones), statistics.median(others)


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def segdiff(*args: object, env: dict[str, str] | None = None) -> float:
    """Seconds one ``segdiff`` command takes (it must succeed)."""
    started = time.perf_counter()
    subprocess.run(
        [BIN / "segdiff", *map(str, args)],
        check=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
    )
    return time.perf_counter() - started


# 1. start-up -------------------------------------------------------------------------------
def startup(work: Path) -> list[Figure]:
    cache = work / "demo-cache"
    segdiff("demo", "--repeats", "2", "--cache", cache)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    seen_tensorflow = []

    def launch() -> float:
        started = time.perf_counter()
        process = subprocess.Popen(
            [BIN / "segdiff-gui", "--cache", cache, "--no-run", "--quit-when-painted"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("painted"):
                seconds = time.perf_counter() - started
                if line.startswith("painted 0 runs"):
                    raise RuntimeError(f"segdiff-gui showed no runs of {cache}")
                seen_tensorflow.append("tensorflow=True" in line)
                break
        else:
            raise RuntimeError("segdiff-gui exited without painting")
        process.kill()
        process.wait()
        return seconds

    seconds, floor = alternating(launch, lambda: _painted_floor(env), 7)
    return [
        Figure("startup", "bare pyqtgraph window, one image (plain_window.py): painted", floor,
               "s", "—", True),
        Figure("startup", "launch → window painted with the demo's ten runs", seconds, "s", "—",
               True),
        against_floor("startup", "launch on a cache of ten runs", seconds, floor, 1.15,
                      "bare window"),
        Figure("startup", "GUI processes that imported TensorFlow", sum(seen_tensorflow), "",
               "0", not any(seen_tensorflow)),
    ]  # fmt: skip


def _painted_floor(env: dict[str, str]) -> float:
    """Seconds until a bare PySide6 + pyqtgraph window showing one map says it has painted: the
    floor under the launch figure on this machine today."""
    started = time.perf_counter()
    result = subprocess.run([PYTHON, Path(__file__).with_name("plain_window.py")],
                            capture_output=True, text=True, env=env, check=True)  # fmt: skip
    if "painted" not in result.stdout:
        raise RuntimeError("the bare window did not paint")
    return time.perf_counter() - started


# 1b. a newcomer's first minute --------------------------------------------------------------
def _appearing(
    command: list[object], finished: Callable[[], list[Path]], count: int, env: dict[str, str]
) -> list[float]:
    """Start ``command``; seconds until each of the first ``count`` files ``finished`` lists
    appears (polled every 20 ms), then kill it."""  # fmt: skip
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=env, start_new_session=True)  # fmt: skip
    seen: dict[Path, float] = {}
    try:
        while len(seen) < count:
            if time.perf_counter() - started > 300 or process.poll() not in (None, 0):
                raise RuntimeError(f"{command[0]} made {len(seen)} of {count} files")
            for path in finished():
                seen.setdefault(path, time.perf_counter() - started)
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, 9)  # the window and its engine children
        process.wait()
    return sorted(seen.values())


def fresh_demo(work: Path) -> list[Figure]:
    """``segdiff-gui`` with no arguments on a new cache, as a newcomer starts it: seconds until
    the first of the demo's ten runs is in the cache, and the last; against a hand-written
    TensorFlow script's first map (its import, the model's loading, one inference)."""
    from segdiff_gui.resources import demo_images, demo_model

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    first, last, floor = [], [], []
    for attempt in range(3):
        cache = work / f"fresh-demo-{attempt}"
        runs = lambda cache=cache: list(cache.glob("runs/*/*.h5"))  # noqa: E731 - one line
        times = _appearing([BIN / "segdiff-gui", "--cache", cache], runs, 10, env)
        first.append(times[0])
        last.append(times[-1])
        out = work / f"fresh-plain-{attempt}"
        out.mkdir()
        script = [PYTHON, Path(__file__).with_name("plain_tf.py"), demo_model(), out,
                  *demo_images()]  # fmt: skip
        floor += _appearing(script, lambda out=out: list(out.glob("b1.npy")), 1, env)
    first_s, last_s, floor_s = map(statistics.median, (first, last, floor))
    return [
        Figure("fresh demo", "plain TensorFlow script (plain_tf.py): its first map", floor_s,
               "s", "—", True),
        Figure("fresh demo", "segdiff-gui on a new cache: the first map", first_s, "s", "—", True),
        against_floor("fresh demo", "first map in the window", first_s, floor_s, 1.10,
                      "plain script"),
        Figure("fresh demo", "… all ten of the demo's runs", last_s, "s", "—", True),
    ]  # fmt: skip


# 2 and 3. engine overhead and cache hits ---------------------------------------------------
def engine(work: Path) -> list[Figure]:
    from segdiff_gui.resources import demo_images, demo_model

    configs = ["batch=1", "batch=64", "xla=on", "precision=bf16"]
    arguments = [demo_model(), *demo_images()]
    for spec in configs:
        arguments += ["--config", spec]
    ours, hits, plain, floors = [], [], [], []
    for attempt in range(3):
        cache = work / f"engine-cache-{attempt}"
        ours.append(segdiff("run", *arguments, "--repeats", "1", "--cache", cache))
        # A hit takes a few tenths of a second, where this machine's noise is a few hundredths:
        # more of them for a steady median, each beside its floor (plain_hit.py: numpy and
        # h5py imported, the run files' bytes read).
        floor_script = [PYTHON, Path(__file__).with_name("plain_hit.py"), cache]
        for _ in range(5):
            hits.append(segdiff("run", *arguments, "--repeats", "1", "--cache", cache))
            floors.append(timed(lambda script=floor_script: subprocess.run(
                script, check=True, capture_output=True)))  # fmt: skip
        out = work / f"plain-{attempt}"
        out.mkdir()
        plain.append(
            timed(
                lambda out=out: subprocess.run(
                    [
                        PYTHON,
                        Path(__file__).with_name("plain_tf.py"),
                        demo_model(),
                        out,
                        *demo_images(),
                    ],
                    check=True,
                    capture_output=True,
                )  # fmt: skip
            )
        )
    first, hit, baseline, floor = map(statistics.median, (ours, hits, plain, floors))
    return [
        Figure("engine", "segdiff run, 4 configurations (s)", first, "s", "—", True),
        Figure("engine", "hand-written TensorFlow script, same 4 (s)", baseline, "s", "—", True),
        Figure("engine", "overhead: segdiff run / plain script", first / baseline, "×",
               "≤ 1.15", first / baseline <= 1.15),
        Figure("engine", "cache hit: first run / the same run again", first / hit, "×",
               "≥ 20", first / hit >= 20),
        Figure("engine", "numpy + h5py, the run files read (plain_hit.py)", floor, "s", "—",
               True),
        Figure("engine", "cache hit: the same run again", hit, "s", "—", True),
        against_floor("engine", "cache hit, segdiff run", hit, floor, 1.25, "plain read"),
    ]  # fmt: skip


# 4. interaction ----------------------------------------------------------------------------
def write_runs(root: Path, values: list[np.ndarray]) -> list:
    """Store ``values`` as four runs of one image in a cache; returns their records."""
    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.storage import ResultCache

    cache = ResultCache(root)
    configs = [RunConfig(), RunConfig(batch=64), RunConfig(device="gpu:0"),
               RunConfig(precision="mixed_bfloat16")]  # fmt: skip
    for config, plane in zip(configs, values, strict=True):
        cache.write_run(record("synthetic.png", config, 0, plane))
    return cache.records()


def open_window(root: Path):  # type: ignore[no-untyped-def]
    """The main window showing every run stored under ``root``, painted; with its app."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from segdiff_gui.storage import ResultCache
    from segdiff_gui.ui.inspection import InspectionModel
    from segdiff_gui.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    cache = ResultCache(root)
    window = MainWindow(InspectionModel(), cache)
    window.resize(1400, 900)
    window.show()
    window.model.set_runs(cache, cache.records())
    app.processEvents()
    return app, window


def repainted(app, window) -> float:  # type: ignore[no-untyped-def]
    """Seconds to repaint the views now (not when Qt would get round to it)."""
    return timed(lambda: (window.grid.viewport().repaint(), app.processEvents()))


def cutoff_changer(window):  # type: ignore[no-untyped-def]
    """A new cutoff each call → seconds until every flip mask and count is ready."""
    cutoffs = iter(np.linspace(0.40, 0.60, 200))

    def move() -> None:
        window.model.cutoff = float(next(cutoffs))

    def new_cutoff() -> float:
        seconds = timed(move)
        study = window.model.study
        assert study is not None
        # The counts the cutoff control shows (it has made them already; this makes sure).
        return seconds + timed(lambda: [study.flip_count(run) for run in study.others])

    return new_cutoff


def interaction(work: Path) -> list[Figure]:
    from segdiff_gui.ui.view_modes import view_mode

    root = work / "interaction-cache"
    write_runs(root, maps(2048))
    app, window = open_window(root)
    window.model.mode = view_mode("flips")  # the mode whose images change with the cutoff
    app.processEvents()
    new_cutoff = cutoff_changer(window)

    def repaint() -> float:
        new_cutoff()
        return repainted(app, window)

    pixels = iter(zip(range(100, 2000, 37), range(200, 2000, 41), strict=False))

    def select() -> None:
        window.model.selected_pixel = next(pixels)

    def click() -> float:
        return timed(select)

    study = window.model.study
    assert study is not None
    other = study.others[0]

    def curve() -> float:
        return timed(lambda: study.curve(other))

    figures = []
    level_modes = iter(["per view", "shared"] * 10)

    def new_scale() -> None:
        window.model.level_mode = next(level_modes)

    def rescale() -> float:
        # The difference view's scale, shared or per view: every view redrawn at new levels.
        seconds = timed(new_scale)
        return seconds + repainted(app, window)

    window.model.mode = view_mode("difference")
    app.processEvents()
    figures.append(("difference view: shared ↔ per-view scale", median_of(rescale, 7), 0.250))
    window.model.mode = view_mode("flips")
    app.processEvents()
    figures += [
        # One frame at 60 Hz: an absolute target, since a frame is what the eye sees.
        ("a new cutoff → flip masks and counts", median_of(new_cutoff, 9), 0.016),
        ("a new cutoff → views repainted", median_of(repaint, 9), 0.050),
        ("a click → inspector filled", median_of(click, 15), 0.005),
        ("the full flips-vs-cutoff curve (1 run)", median_of(curve, 5), 0.300),
    ]  # fmt: skip
    window.close()
    return [
        Figure("interaction", f"{what}, 4 runs of 2048²", seconds * 1000, "ms",
               f"≤ {limit * 1000:g} ms", seconds <= limit)
        for what, seconds, limit in figures
    ]  # fmt: skip


# 5. memory bandwidth -----------------------------------------------------------------------
def bandwidth(work: Path) -> list[Figure]:
    from segdiff_gui.core.analysis import difference_map, flip_mask, signed_difference

    reference, other = maps(2048)[:2]
    read = reference.nbytes + other.nbytes
    out = np.empty_like(reference)

    def rate(action: Callable[[], object]) -> float:
        return read / median_of(lambda: timed(action), 9) / 1e9

    numpy_pass = rate(lambda: np.add(reference, other, out=out))
    flips = rate(lambda: flip_mask(reference, other, 0.5))
    diff = rate(lambda: difference_map(reference, other))
    exact = rate(lambda: signed_difference(reference, other))
    return [
        Figure("bandwidth", "plain numpy pass (a + b) over 2 maps", numpy_pass, "GB/s", "—", True),
        Figure("bandwidth", "flip mask kernel", flips, "GB/s", f"≥ {numpy_pass / 3:.2f} (⅓)",
               flips >= numpy_pass / 3),
        Figure("bandwidth", "difference kernel (float32 map: views, histograms)", diff, "GB/s",
               f"≥ {numpy_pass / 3:.2f} (⅓)", diff >= numpy_pass / 3),
        # Widening to float64 is numpy's casting loop, not SIMD; only reductions use it.
        Figure("bandwidth", "exact float64 difference (whole map, for reference)", exact, "GB/s",
               "—", True),
    ]  # fmt: skip


# 6. scale ---------------------------------------------------------------------------------
def scale(work: Path) -> list[Figure]:
    """Four runs of 8192×8192 in a bundle, opened in the GUI: time to paint and peak memory."""
    from segdiff_gui.storage import ResultCache
    from segdiff_gui.storage.bundle import write_bundle

    root = work / "scale-cache"
    values = maps(8192)
    records = write_runs(root, values)
    raw_maps = [work / f"scale-{index}.npy" for index in range(len(values))]
    for path, value in zip(raw_maps, values, strict=True):
        np.save(path, value)
    del values
    bundle = work / "scale.h5"
    write_bundle(ResultCache(root), [r.key for r in records], bundle)
    raw = 4 * 8192 * 8192 * 4
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    # A wrapper process reports the GUI's peak resident memory (ru_maxrss of its child).
    # It also times the window's "first paint" line: the first map, on screen while the
    # others are still read.
    wrapper = (
        "import resource, subprocess, sys, time; started = time.perf_counter(); first = 0.0\n"
        "gui = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)\n"
        "for line in gui.stdout:\n"
        "    first = first or (time.perf_counter() - started) * line.startswith('first paint')\n"
        "assert gui.wait() == 0\n"
        "print(time.perf_counter() - started, first or time.perf_counter() - started, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)"
    )
    timings, firsts, peaks, floors = [], [], [], []
    plain = [PYTHON, Path(__file__).with_name("plain_large.py"), *raw_maps]
    for _ in range(3):
        result = subprocess.run(
            [PYTHON, "-c", wrapper, BIN / "segdiff-gui", "--open", bundle, "--quit-when-painted"],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        seconds, first, peak = result.stdout.split()
        timings.append(float(seconds))
        firsts.append(float(first))
        peaks.append(int(peak))
        # Its floor, in turn: the same maps, raw, loaded and painted once in a bare window.
        floors.append(timed(lambda: subprocess.run(plain, env=env, check=True,
                                                   capture_output=True)))  # fmt: skip
    seconds, peak = statistics.median(timings), statistics.median(peaks)
    first, floor = statistics.median(firsts), statistics.median(floors)
    moving = _scale_interaction(root)
    cutoff_limit = 16 * 0.020  # the 2048² target for 16 times the pixels
    return [
        Figure("scale", "4 runs of 8192²: open → first map painted", first, "s", "—", True),
        Figure("scale", "bare window: the 4 maps raw (.npy), painted (plain_large.py)", floor, "s",
               "—", True),
        Figure("scale", "4 runs of 8192²: open → all painted → quit", seconds, "s", "—", True),
        against_floor("scale", "open of 4 runs of 8192², all painted", seconds, floor, 1.5,
                      "bare window"),
        Figure("scale", "peak resident memory / raw float32 data", peak / raw, "×", "≤ 2.5",
               peak / raw <= 2.5),
        Figure("scale", "pan or zoom → views repainted, 4 runs of 8192²", moving["pan"] * 1000,
               "ms", "≤ 50 ms", moving["pan"] <= 0.050),
        Figure("scale", "a new cutoff → masks, counts, views repainted", moving["cutoff"] * 1000,
               "ms", f"≤ {cutoff_limit * 1000:g} ms (16× 2048²)", moving["cutoff"] <= cutoff_limit),
    ]  # fmt: skip


def _scale_interaction(root: Path) -> dict[str, float]:
    """In this process: the 8192² runs in a window, panned, zoomed and re-cut."""
    app, window = open_window(root)
    view = next(iter(window.grid.panels.values())).view
    moves = iter([(0.9, 0.9), (1.1, 1.1), (0.8, 0.8), (1.25, 1.25)] * 5)
    new_cutoff = cutoff_changer(window)

    def pan_or_zoom() -> float:
        scale = next(moves)
        view.scaleBy(scale)
        view.translateBy((200 * scale[0] - 190, 100))
        return repainted(app, window)

    def cutoff() -> float:
        return new_cutoff() + repainted(app, window)

    found = {"pan": median_of(pan_or_zoom, 15), "cutoff": median_of(cutoff, 7)}
    window.close()
    return found


# 7. a large matrix -------------------------------------------------------------------------
def matrix(work: Path) -> list[Figure]:
    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.resources import demo_images, demo_model
    from segdiff_gui.runner.matrix import MatrixRunner
    from segdiff_gui.runner.plan import plan_matrix
    from segdiff_gui.storage import ResultCache

    configs = [
        RunConfig(batch=batch, xla=xla, precision=precision, threads=threads)
        for batch in (1, 4, 16, 64)
        for xla in (False, True)
        for precision in ("float32", "mixed_bfloat16")
        for threads in (0, 1)
    ]
    cache = ResultCache(work / "matrix-cache")
    plan = plan_matrix(demo_model(), demo_images(), configs, cache=cache, repeats=1)
    runner = MatrixRunner(plan, cache)
    starts = []
    original = runner._start

    def counting_start(job, early=False):  # type: ignore[no-untyped-def]
        starts.append(job)
        return original(job, early)

    runner._start = counting_start  # type: ignore[method-assign]
    started = time.perf_counter()
    messages = list(runner.run())
    seconds = time.perf_counter() - started
    groups = len({config.process_settings() for config in configs})
    finished = sum(type(m).__name__ == "RunFinished" for m in messages)
    return [
        Figure("matrix", f"32 configurations: runs finished ({seconds:.0f} s)", finished, "",
               "32", finished == 32),
        Figure("matrix", f"TensorFlow children started ({groups} process-level groups)",
               len(starts), "", f"= {groups}", len(starts) == groups),
    ]  # fmt: skip


def _synthetic_set(folder: Path, count: int) -> list[Path]:
    """``count`` distinct 256×256 grayscale images made from the demo's (rolled and flipped):
    what the demo model takes, each image its own bytes."""
    from PIL import Image

    from segdiff_gui.resources import demo_images

    folder.mkdir(exist_ok=True)
    sources = [np.asarray(Image.open(path)) for path in demo_images()]
    paths = []
    for index in range(count):
        picture = np.roll(sources[index % len(sources)], index // len(sources) * 7, axis=1)
        path = folder / f"set_{index:04d}.png"
        Image.fromarray(picture if index % 2 else picture[::-1]).save(path)
        paths.append(path)
    return paths


def _peak_tree_mib(command: list[object]) -> tuple[float, float]:
    """Seconds ``command`` takes and the peak of the resident memory of it and its children
    together (sampled every 20 ms), in MiB."""
    import psutil

    started = time.perf_counter()
    process = psutil.Popen(
        [str(part) for part in command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    peak = 0
    while process.poll() is None:
        tree = [process, *process.children(recursive=True)]
        resident = 0
        for member in tree:
            with contextlib.suppress(psutil.Error):  # a child that just ended
                resident += member.memory_info().rss
        peak = max(peak, resident)
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"{command[:2]} failed: {process.stderr.read()[-2000:]!r}")
    return seconds, peak / 2**20


def sweep(work: Path) -> list[Figure]:
    """A test set swept as ``model.predict(x, batch_size=B)`` runs it: each configuration of
    the default matrix (batch 1 and 64 on the CPU), on synthetic sets of 64 and 512 images,
    ``segdiff run --sweep`` on a fresh cache against the plain script that predicts the same
    and writes the maps to one HDF5 file (plain_sweep.py), in turn, three times each (the
    medians: one slow run on a shared machine moves a mean of two by 10 %); and the peak
    memory of both (the process tree's), which for the sweep must stay near the plain
    script's and flat as the set grows."""
    from segdiff_gui.resources import demo_model

    figures: list[Figure] = []
    peaks: dict[int, float] = {}
    for count in (64, 512):
        images = _synthetic_set(work / f"sweep-set-{count}", count)
        for batch in (1, 64):
            ours_s, floors_s, ours_mib, floors_mib = [], [], [], []
            for attempt in range(3):  # in turn: a load that comes and goes falls on both
                cache = work / f"sweep-{count}-{batch}-{attempt}"
                seconds, mib = _peak_tree_mib(
                    [BIN / "segdiff", "run", demo_model(), *images, "--sweep", "--config",
                     f"batch={batch}", "--repeats", "1", "--cache", cache]
                )  # fmt: skip
                ours_s.append(seconds)
                ours_mib.append(mib)
                out = work / f"plain-sweep-{count}-{batch}-{attempt}.h5"
                seconds, mib = _peak_tree_mib(
                    [PYTHON, Path(__file__).with_name("plain_sweep.py"), demo_model(), out,
                     batch, *images]
                )  # fmt: skip
                floors_s.append(seconds)
                floors_mib.append(mib)
            ours, floor = statistics.median(ours_s), statistics.median(floors_s)
            figures.append(
                against_floor(
                    "sweep", f"{count} images, batch {batch}", ours, floor, 1.10, "plain predict"
                )  # fmt: skip
            )
            ours_peak, floor_peak = max(ours_mib), max(floors_mib)
            peaks[count] = max(peaks.get(count, 0.0), ours_peak)
            figures.append(
                Figure("sweep", f"{count} images, batch {batch}: peak MiB over the plain "
                       f"script's ({ours_peak:.0f} vs {floor_peak:.0f})",
                       ours_peak - floor_peak, "MiB", "≤ 256", ours_peak - floor_peak <= 256)
            )  # fmt: skip
    growth = peaks[512] / peaks[64]
    figures.append(
        Figure("sweep", "peak memory, 512 images / 64 images", growth, "×", "≤ 1.10",
               growth <= 1.10)
    )  # fmt: skip
    return figures


def runtimes(work: Path) -> list[Figure]:
    """Per runtime: ``segdiff run`` of one configuration on a fresh result cache (a child's
    start-up, the model's loading and the first map), with an empty compilation cache and
    with the one an earlier run left (JAX's persistent cache: a model's loading compiles
    every layer's initialiser)."""
    from segdiff_gui.core.runtimes import installed_runtimes
    from segdiff_gui.resources import demo_images, demo_model

    figures = []
    for runtime in installed_runtimes():
        if runtime.conversion:
            continue  # converted runtimes: the conversions benchmark
        if runtime.keras != 3:
            continue  # Keras 2 (tf_keras) runs a Keras 2 file; the demo is a Keras 3 .keras
        cold, warm = [], []
        arguments = [demo_model(), demo_images()[0], "--config", f"runtime={runtime.name}"]
        for attempt in range(3):
            compiled = {
                "SEGDIFF_COMPILATION_CACHE": str(work / f"compiled-{runtime.name}-{attempt}")
            }
            for times, name in ((cold, "cold"), (warm, "warm")):
                cache = work / f"{runtime.name}-{name}-{attempt}"
                times.append(segdiff("run", *arguments, "--repeats", "1", "--cache", cache,
                                     env=compiled))  # fmt: skip
        cold_s, warm_s = statistics.median(cold), statistics.median(warm)
        uses_cache = runtime.name == "jax"
        figures += [
            Figure("runtimes", f"{runtime.title}: child start-up → first map, cold", cold_s, "s",
                   "—", True),
            Figure("runtimes", f"{runtime.title}: the same with the compilation cache", warm_s,
                   "s", "≤ ½ cold" if uses_cache else "—",
                   warm_s <= cold_s / 2 if uses_cache else True),
        ]  # fmt: skip
    return figures


def layers(work: Path) -> list[Figure]:
    """The layer probe on 57 layers at 512×512 (see bench_layers): what the probe's child holds
    beyond the plain run's, what the comparison holds, and the probe's time."""
    from tests.benchmarks.bench_layers import measure

    found = measure(work)
    extra = found["probe_child_mib"] - found["plain_child_mib"]
    budget = found["budget_mib"]
    return [
        Figure("layers", f"one configuration's activations ({found['layers']:.0f} layers, 512²)",
               found["activations_mib"], "MiB", "—", True),
        Figure("layers", f"probe child peak ({found['plain_child_mib']:.0f} MiB plain run's)",
               found["probe_child_mib"], "MiB", f"≤ plain + {budget:.0f} MiB budget",
               extra <= budget),
        Figure("layers", "comparison of two stored probes: peak above start",
               found["compare_mib"], "MiB", f"≤ {budget:.0f} MiB budget",
               found["compare_mib"] <= budget),
        Figure("layers", f"probe ÷ plain run time ({found['probe_s']:.1f} s ÷ "
               f"{found['plain_s']:.1f} s)", found["probe_ratio"], "×", "—", True),
        Figure("layers", f"comparison time ({2 * found['activations_mib']:.0f} MiB read)",
               found["compare_s"], "s", "—", True),
        Figure("layers", "probe's final map = plain run's, bit for bit (both sides)",
               float(found["bitwise"]), "", "1", bool(found["bitwise"])),
    ]  # fmt: skip


def conversions(work: Path) -> list[Figure]:
    """Each converted runtime: its conversion's time and size, and its inference time per
    image against Keras on TensorFlow (see bench_conversions)."""
    from segdiff_gui.core.runtimes import RUNTIMES, installed_runtimes
    from tests.benchmarks.bench_conversions import measure

    if not all(RUNTIMES[name].installed() for name in ("litert", "onnxruntime")):
        missing = [r.title for r in RUNTIMES.values() if r.conversion and not r.installed()]
        return [Figure("conversions", f"not installed: {', '.join(missing)}", 0, "", "—", True)]
    found = measure(work)
    keras = found["tensorflow"]["inference_ms"]
    figures = [
        Figure("conversions", f"Keras on TensorFlow: inference per image "
               f"({found['tensorflow']['images']:.0f} images, batch 1)", keras, "ms", "—", True),
    ]  # fmt: skip
    for runtime in installed_runtimes():
        if not runtime.conversion or runtime.name not in found:
            continue
        figure = found[runtime.name]
        figures += [
            Figure("conversions", f"{runtime.title}: conversion ({figure['bytes'] / 1024:.0f} "
                   "KiB artefact)", figure["conversion_s"], "s", "—", True),
            Figure("conversions", f"{runtime.title}: inference per image ({keras:.1f} ms Keras)",
                   figure["inference_ms"], "ms", "—", True),
        ]  # fmt: skip
    return figures


def artefacts(work: Path) -> list[Figure]:
    """The user's own artefacts: the demo converted as users convert it
    (tests/engine/artefact_files.py), and for each, ``segdiff run`` on a new cache until its
    first map is stored, against a hand-written script running the same file with its
    runtime's documented API until it has saved its map (plain_artefact.py), in turn."""
    from segdiff_gui.resources import demo_images

    folder = work / "artefacts"
    folder.mkdir()
    subprocess.run([PYTHON, "-m", "tests.engine.artefact_files", folder], check=True,
                   capture_output=True, cwd=REPO)  # fmt: skip
    image = demo_images()[0]
    env = dict(os.environ)
    figures = []
    for name in ("float32.tflite", "model.onnx", "model.xml"):
        attempts = iter(range(100))

        def ours(name: str = name, attempt: Iterator[int] = attempts) -> float:
            cache = work / f"artefact-cache-{name}-{next(attempt)}"
            command = [BIN / "segdiff", "run", folder / name, image, "--config", "batch=1",
                       "--repeats", "1", "--cache", cache]  # fmt: skip
            return _appearing(command, lambda: list(cache.glob("runs/*/*.h5")), 1, env)[0]

        def plain(name: str = name, attempt: Iterator[int] = attempts) -> float:
            out = work / f"plain-{name}-{next(attempt)}.npy"
            command = [PYTHON, Path(__file__).with_name("plain_artefact.py"), folder / name,
                       out, image]  # fmt: skip
            return _appearing(command, lambda: [out] if out.exists() else [], 1, env)[0]

        first, floor = alternating(ours, plain, 5)
        figures += [
            Figure("artefacts", f"{name}: plain script (plain_artefact.py), its map", floor,
                   "s", "—", True),
            Figure("artefacts", f"{name}: segdiff run, new cache: the first map", first, "s",
                   "—", True),
            against_floor("artefacts", f"{name}: first map", first, floor, 1.10,
                          "plain script"),
        ]  # fmt: skip
    figures += _artefact_layers(work, folder, image, env)
    return figures


def _artefact_layers(work: Path, folder: Path, image: Path, env: dict[str, str]) -> list[Figure]:
    """The full-int8 artefact's layers against its Keras source (``segdiff layers int8.tflite
    IMAGE --source demo.keras`` on a new cache: both probes and their comparison) against the
    two plain runs of one image, the artefact's (plain_artefact.py) and the source's
    (plain_sweep.py at batch 1), one after the other."""
    from segdiff_gui.resources import demo_model

    attempts = iter(range(100))

    def ours() -> float:
        cache = work / f"artefact-layers-{next(attempts)}"
        return segdiff("layers", folder / "int8.tflite", image, "--source", demo_model(),
                       "--cache", cache)  # fmt: skip

    def plain() -> float:
        number = next(attempts)
        artefact = [PYTHON, Path(__file__).with_name("plain_artefact.py"),
                    folder / "int8.tflite", work / f"plain-int8-{number}.npy", image]  # fmt: skip
        source = [PYTHON, Path(__file__).with_name("plain_sweep.py"), demo_model(),
                  work / f"plain-source-{number}.h5", "1", image]  # fmt: skip
        return timed(lambda: [subprocess.run(c, check=True, capture_output=True, env=env)
                              for c in (artefact, source)])  # fmt: skip

    compared, floor = alternating(ours, plain, 3)
    return [
        against_floor(
            "artefacts",
            "int8.tflite's layers against its Keras source",
            compared,
            floor,
            3.0,
            "the two plain runs",
        ),
    ]


def exact(work: Path) -> list[Figure]:
    """The exact reference (float64) and emulated TF32 against the float32 run on the demo, in
    one child: their forward passes' time (ratio) at batch 1 and 8, and every float32 map's
    distance from the exact one (see bench_exact)."""
    from tests.benchmarks.bench_exact import BATCHES, measure

    found = measure(work)
    ms = found["ms"]
    figures = []
    for batch in BATCHES:
        single, double, tf32 = ms[batch, "float32"], ms[batch, "float64"], ms[batch, "tf32"]
        figures += [
            Figure("exact", f"batch {batch}: float64 forward pass ({single:.1f} ms float32, "
                   f"{found['images']} images)", double, "ms", "—", True),
            Figure("exact", f"batch {batch}: float64 / float32 time", double / single, "×",
                   "≤ 4", double / single <= 4),
            # Rounding every operand of every convolution (inputs and weights, each call):
            # measured 1.9–2.1× under TensorFlow; the target guards against worse.
            Figure("exact", f"batch {batch}: emulated TF32 / float32 time", tf32 / single, "×",
                   "≤ 3", tf32 / single <= 3),
        ]  # fmt: skip
    return [
        *figures,
        Figure("exact", "float32 maps' max |Δ| from the exact map (×1e-7)",
               found["max_delta"] * 1e7, "", "< 100", found["max_delta"] < 1e-5),
        Figure("exact", "float32 maps' max ULP at the exact value", found["max_ulp"], "ULP",
               "—", True),
    ]  # fmt: skip


_API_HIT = """
import sys, time
started = time.perf_counter()
import segdiff_gui as segdiff
study = segdiff.run(segdiff.demo_model(), segdiff.demo_images(), sys.argv[2:], repeats=1,
                    cache=sys.argv[1])
hit = time.perf_counter() - started
started = time.perf_counter()
comparison = study.compare()
compared = time.perf_counter() - started
started = time.perf_counter()
table = comparison.table
tabled = time.perf_counter() - started
started = time.perf_counter()
html = study._repr_html_()
shown = time.perf_counter() - started
started = time.perf_counter()
runs = segdiff.open_cache(sys.argv[1]).study(image=study.image)
opened = time.perf_counter() - started
print(hit, compared, tabled, shown, opened)
"""


def api(work: Path) -> list[Figure]:
    """The Python API in a fresh interpreter (a notebook's first cell): a matrix served from
    the cache (imports included), its comparison as a DataFrame, the study's HTML, and a
    cache opened and grouped; against the CLI's computing the same matrix."""
    from segdiff_gui.resources import demo_images, demo_model

    configs = ["batch=1", "batch=64", "xla=on", "precision=bf16"]
    arguments = [demo_model(), *demo_images()]
    for spec in configs:
        arguments += ["--config", spec]
    cache = work / "api-cache"
    first = segdiff("run", *arguments, "--repeats", "1", "--cache", cache)
    found = []
    for _ in range(5):
        result = subprocess.run(
            [PYTHON, "-c", _API_HIT, str(cache), *configs],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        found.append([float(value) for value in result.stdout.split()])
    columns = zip(*found, strict=True)
    hit, compared, tabled, shown, opened = (statistics.median(c) for c in columns)
    return [
        Figure("api", "segdiff.run served from the cache, imports included (s)", hit, "s",
               "≤ 0.5 s", hit <= 0.5),
        Figure("api", "cache hit: segdiff run computing it / segdiff.run", first / hit, "×",
               "≥ 20", first / hit >= 20),
        Figure("api", "study.compare(): 4 maps of 256² read and compared (ms)",
               compared * 1000, "ms", "≤ 100 ms", compared <= 0.1),
        Figure("api", "its first .table (pandas imported: most of it) (ms)", tabled * 1000,
               "ms", "—", True),
        Figure("api", "a study's HTML with its pictures (ms)", shown * 1000, "ms",
               "≤ 200 ms", shown <= 0.2),
        Figure("api", "open_cache → one group's Study (ms)", opened * 1000, "ms",
               "≤ 200 ms", opened <= 0.2),
    ]  # fmt: skip


BENCHMARKS = {
    "startup": startup,
    "fresh_demo": fresh_demo,
    "engine": engine,
    "interaction": interaction,
    "bandwidth": bandwidth,
    "scale": scale,
    "matrix": matrix,
    "sweep": sweep,
    "runtimes": runtimes,
    "layers": layers,
    "conversions": conversions,
    "artefacts": artefacts,
    "exact": exact,
    "api": api,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks", description=__doc__)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), help="run only these")
    args = parser.parse_args(argv)
    figures: list[Figure] = []
    # Measure segdiff as installed: pip compiles a wheel's modules, but a checkout run with
    # PYTHONDONTWRITEBYTECODE (set on the reference machine) would compile ~90 of them at
    # every launch of every process the suite starts.
    compileall.compile_dir(REPO / "segdiff_gui", quiet=1)
    with tempfile.TemporaryDirectory(prefix="segdiff-bench-") as folder:
        for name in args.only or list(BENCHMARKS):
            print(f"running {name}…", file=sys.stderr, flush=True)
            found = BENCHMARKS[name](Path(folder))
            for figure in found:
                mark = "pass" if figure.passed else "SHORT"
                print(f"{mark:<6}{figure.benchmark:<12}{figure.what:<58}"
                      f"{figure.value:>10.3f} {figure.unit:<5} target {figure.target}",
                      flush=True)  # fmt: skip
            figures += found
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(f) for f in figures], indent=2))
    floored = [f for f in figures if f.floor is not None]
    if floored:
        print("\nAgainst their floors, measured in the same run:")
        print(f"{'figure':<58}{'segdiff':>10}{'floor':>10}{'ratio':>9}  target")
        for f in floored:
            assert f.ours is not None and f.floor is not None
            print(f"{f.what:<58}{f.ours:>9.3f}s{f.floor:>9.3f}s{f.value:>8.2f}×  {f.target} "
                  f"{'met' if f.passed else 'NOT MET'}")  # fmt: skip
    short = [f for f in figures if not f.passed]
    print(f"{len(figures) - len(short)} of {len(figures)} figures meet their targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
