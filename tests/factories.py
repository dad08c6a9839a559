"""Builders shared by test modules: stored runs, caches and studies made from synthetic maps,
files that lie about themselves, an artefact beside its source, small helpers to drive the engine
and the window, and the check of Model Explorer's node data. Fixtures stay in the conftest
files; what a test module builds for itself alone stays in it."""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.resources import demo_model
from segdiff_gui.runner.layers import LayerProbe, LayerProbeSession
from segdiff_gui.storage import ResultCache, RunRecord, write_bundle
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import expected_key
from tests.hostile.artefact_files import tflite_bytes
from tests.hostile.names import HOSTILE_NAMES

IMAGE_HASH = "5e" * 32


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sealed(record: RunRecord, **changes) -> RunRecord:
    """``record`` with ``changes``, made self-consistent as the engine writes runs: the batch
    and raw output shape of its configuration, its label, and the key of its inputs."""
    record = replace(record, **changes)
    config = record.run_config
    shape = record.map_shape if record.probabilities is None else record.probabilities.shape
    channels = shape[2] if record.kind == "softmax" else 1
    record = replace(
        record,
        label=f"{config.label()} r{record.repeat}",
        batch_hashes=[record.target_hash] * config.batch,
        batch_names=[record.target_name] * config.batch,
        raw_output_shape=[config.batch, *shape[:2], channels],
        map_shape=tuple(shape),
    )
    return replace(record, key=expected_key(record))


def make_record(name: str, values: np.ndarray, label: str = "cpu b1 r0", **changes) -> RunRecord:
    """A sigmoid run of ``m.keras`` (whose bytes ``name`` stands for) holding ``values``; the
    label gives the configuration and the repeat (``cpu b64 r1``)."""
    spec, _, repeat = label.rpartition(" r")
    device, batch = spec.split()[:2]
    base = RunRecord(
        key="",
        label=label,
        config=RunConfig(device=device, batch=int(batch[1:])).to_dict(),
        repeat=int(repeat),
        model_name="m.keras",
        model_hash=digest(name),
        target_name="t.png",
        target_hash=IMAGE_HASH,
        batch_hashes=[],
        batch_names=[],
        preprocessing=Preprocessing().to_dict(),
        output={"output": None},
        output_name="mask",
        kind="sigmoid",
        raw_output_shape=[],
        map_shape=values.shape,
        provenance=Provenance.from_dict(
            {
                "device": "cpu:0",
                "wall_time_s": 0.5,
                "environment": {"TF_ENABLE_ONEDNN_OPTS": "1"},
                "onednn_enabled": True,
            }
        ),
        probabilities=values,
    )
    return sealed(base, **changes)


def bundle_of(records: list[RunRecord], path, source: ResultCache):
    """``records`` written into ``source`` and bundled at ``path``."""
    for record in records:
        source.write_run(record)
    write_bundle(source, [record.key for record in records], path)
    return path


def two_configurations_cache(tmp_path, kind: str) -> ResultCache:
    """Two configurations, two repeats of one, on one image: a sigmoid or a softmax map."""
    cache = ResultCache(tmp_path / "cache")
    rng = np.random.default_rng(3)
    if kind == "sigmoid":
        values = rng.random((6, 6), dtype=np.float32)
        changes = {}
    else:
        values = rng.dirichlet(np.ones(3), size=(6, 6)).astype(np.float32)
        changes = {"kind": "softmax"}
    moved = values.copy()
    moved[2, 3] += np.float32(0.3)
    for label, map_ in (("cpu b1 r0", values), ("cpu b1 r1", values), ("cpu b64 r0", moved)):
        cache.write_run(make_record("m", map_, label, **changes))
    return cache


FILE_NAME_BYTES = 255


def hostile_names_cache(root) -> ResultCache:
    """Two runs (batch 1 and 64) per name, of a model, an image and an output so named; the
    batch-64 run came from a host whose name is that name too."""
    cache = ResultCache(root)
    cache.claim()
    base = np.random.default_rng(0).random((24, 20), dtype=np.float32)
    for index, name in enumerate(HOSTILE_NAMES):
        file = name[: FILE_NAME_BYTES - len(".keras")]
        names = {"model_name": f"{file}.keras", "target_name": f"{file}.png", "output_name": name}
        cache.write_run(make_record(f"m{index}", base, "cpu b1 r0", **names))
        moved = base + np.float32((index + 1) * 1e-3)
        other = make_record(f"m{index}", moved, "cpu b64 r0", **names)
        provenance = other.provenance.updated({"host": name})
        cache.write_run(sealed(other, label=f"{name}: cpu b64 r0", provenance=provenance))
    return cache


def seed_study() -> GroupAnalysis:
    """Two float32 runs of a 4 × 5 map: one pixel crosses the cutoff 0.55, another moves 1 ULP."""
    reference = np.full((4, 5), 0.2, dtype=np.float32)
    reference[1, 2] = 0.549857
    other = reference.copy()
    other[1, 2] = 0.550076
    other[3, 4] = np.nextafter(np.float32(0.2), np.float32(1))
    runs = [
        StudyRun("a" * 64, "cpu b1 r0", RunConfig(), 0, reference),
        StudyRun("b" * 64, "gpu:0 b1 r0", RunConfig(device="gpu:0"), 0, other),
    ]
    return GroupAnalysis(runs, cutoff=0.55)


def lying_png(path, side=16384):
    """About 4 KB whose header claims ``side``² RGBA: the start of a deflate stream of zero
    rows, far short of the 1 GiB that header promises."""

    def chunk(kind, data):
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0)
    rows = zlib.compressobj(9)
    start = rows.compress(b"\x00" * (4 << 20)) + rows.flush(zlib.Z_SYNC_FLUSH)
    note = chunk(b"tEXt", b"name\x00" + path.name.encode())  # each file its own bytes
    body = chunk(b"IHDR", header) + note + chunk(b"IDAT", start) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


def engine_script(code: str, **environment: str) -> dict:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter: the engine's
    runtimes are imported there, never in the test process."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **environment},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_layer_probe(session: LayerProbeSession) -> LayerProbe:
    """``session``'s plain runs and probes run to the end, then compared."""
    for _ in session.plain_runner().run():
        pass
    for _ in session.probe_runner().run():
        pass
    return session.compare()


SWEEP_IMAGES = ("a.png", "b.png", "c.png", "d.png")


class RecordingBar:
    """What ``cli/progress_view.drive`` asks of rich's progress, recording where its bar stands
    and what it said."""

    def __init__(self) -> None:
        self.total: float | None = None
        self.completed = 0.0
        self.seen: list[tuple[float, float | None]] = []
        self.said: list[object] = []  # each description, in turn

    def __enter__(self) -> RecordingBar:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def add_task(self, *_args: object, **_kwargs: object) -> int:
        return 0

    def update(self, _task: int, **fields: object) -> None:
        if "description" in fields:
            self.said.append(fields["description"])
        self.total = fields.get("total", self.total)  # type: ignore[assignment]
        self.completed = fields.get("completed", self.completed)  # type: ignore[assignment]
        self.completed += fields.get("advance", 0)  # type: ignore[operator]
        self.seen.append((self.completed, self.total))

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)


def small_image_set(folder: Path, count: int) -> list[Path]:
    """``count`` distinct 8×8 grey PNGs in a new ``folder``, ``img_00.png`` onwards: a test set
    the fake engine sweeps in moments."""
    folder.mkdir()
    paths = []
    for index in range(count):
        path = folder / f"img_{index:02d}.png"
        pixels = (np.arange(64, dtype=np.uint16).reshape(8, 8) * (index + 1)) % 256
        Image.fromarray(pixels.astype(np.uint8)).save(path)
        paths.append(path)
    return paths


def partial_sweep(root: Path) -> tuple[ResultCache, Path]:
    """``cpu b1`` on four images, ``cpu b64`` (the same map) on the first only; masks that
    the first image's map matches exactly (Dice 1) and the others' half (Dice 2/3)."""
    cache, masks = ResultCache(root / "cache"), root / "masks"
    masks.mkdir()
    truth = np.zeros((4, 4), np.uint8)
    truth[:2] = 255
    for index, image in enumerate(SWEEP_IMAGES):
        values = np.where(truth > 0, 0.9, 0.1).astype(np.float32)
        if index:
            values[1] = 0.1  # half the foreground missed
        Image.fromarray(truth).save(masks / image)
        labels = ("cpu b1", "cpu b64") if index == 0 else ("cpu b1",)
        for label in labels:
            config = RunConfig(batch=int(label.split("b")[1]))
            record = make_record(
                "m", values, f"{label} r0", config=config.to_dict(), target_name=image,
                target_hash=hashlib.sha256(image.encode()).hexdigest(),
            )  # fmt: skip
            cache.write_run(record)
    return cache, masks


def menu_action(window, text: str):
    """The action of the window's menus whose text is ``text``."""
    from PySide6.QtWidgets import QMenu  # only the window's tests load Qt

    for menu in window.menuBar().findChildren(QMenu):
        for action in menu.actions():
            if action.text() == text:
                return action
    raise AssertionError(f"no action {text!r}")


def saved_model(folder: Path) -> Path:
    """A folder the planner takes for a SavedModel (its graph file); the fake engine computes
    its runs without reading it."""
    folder.mkdir()
    (folder / "saved_model.pb").write_bytes(b"a graph")
    return folder


def labelled_runs(name: str, target: str, labels: list[str], seed: int = 0) -> list[RunRecord]:
    """Runs of the model ``name`` on the image ``target``, one per label, each map 1e-3 above
    the one before."""
    rng = np.random.default_rng(seed)
    base = rng.random((24, 20), dtype=np.float32)
    records = []
    for index, label in enumerate(labels):
        values = base + np.float32(index * 1e-3)
        records.append(
            sealed(make_record(name, values, label), target_name=target, target_hash="ab" * 32)
        )
    return records


# What runs beside a .tflite of free batch by default: each of its devices and batches under
# the source at its defaults, the source's exact run, and the artefact's own two.
SOURCE_RUNS = ["cpu b1 r0", "cpu b64 r0", "cpu b1 fp64 r0"]


ARTEFACT_RUNS = ["model.tflite litert cpu b1 r0", "model.tflite litert cpu b64 r0"]


def artefact_files(folder: Path) -> dict[str, Path | list[Path]]:
    """A tiny ``.tflite``, two 8×8 images, and the demo's ``.keras`` as the source."""
    (folder / "model.tflite").write_bytes(tflite_bytes())
    images = []
    for index in range(2):
        path = folder / f"cell_{index}.png"
        Image.fromarray(np.full((8, 8), 40 + 90 * index, np.uint8)).save(path)
        images.append(path)
    return {"artefact": folder / "model.tflite", "source": demo_model(), "images": images}


# node_data_builder.GraphNodeData's fields, and those of a result and of a gradient stop.
GRAPH_NODE_DATA = {
    "results", "thresholds", "gradient", "hideInAggregatedStatsTable", "hideInChildrenStatsTable",
    "hideAggregatedStats", "showExpandedSummaryOnGroupNode",
    "showLabelCountColumnsInChildrenStatsTable",
}  # fmt: skip


RESULT = {"value", "bgColor", "textColor"}


GRADIENT_ITEM = {"stop", "bgColor", "textColor"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def assert_node_data(data: Any) -> None:
    """``data`` is a ``GraphNodeData`` as Model Explorer's documented schema has it: results by
    node id, each a finite number; a gradient from stop 0 to stop 1 in hex colours."""
    assert isinstance(data, dict) and set(data) <= GRAPH_NODE_DATA and data["results"]
    for node, result in data["results"].items():
        assert isinstance(node, str) and isinstance(result, dict)
        assert set(result) <= RESULT and _number(result["value"])
    stops = [item["stop"] for item in data.get("gradient", [])]
    assert stops == sorted(stops) and stops[0] == 0 and stops[-1] == 1
    for item in data["gradient"]:
        assert set(item) <= GRADIENT_ITEM and _number(item["stop"])
        assert item["bgColor"].startswith("#") and len(item["bgColor"]) == 7
    try:  # Model Explorer's own dataclasses, where its package is installed
        import dacite
        from model_explorer import node_data_builder as builder
    except ImportError:
        return
    # Read strictly, as its node data providers' JSON is read (dacite: no unknown key), and
    # written back by its own writer.
    built = dacite.from_dict(builder.GraphNodeData, data, config=dacite.Config(strict=True))
    again = json.loads(built.to_json_string())
    assert again["results"] == data["results"] and again["gradient"] == data["gradient"]
