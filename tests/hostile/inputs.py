"""Hostile inputs that are not cache or bundle entries: models and images a user
is handed. Each case makes its files in a folder and gives the ``segdiff`` arguments that
meet them; ``python -m tests.hostile.table`` runs them against a checkout, before and after."""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from segdiff_gui.resources import demo_images, demo_model


@dataclass(frozen=True)
class InputCase:
    name: str
    make: Callable[[Path], list[object]]  # folder → the arguments of ``segdiff``


def _tensor(folder: Path) -> Path:
    image = folder / "image.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))
    return image


def _saved_model_linked_to_proc(folder: Path) -> list[object]:
    """An untrusted SavedModel folder whose variables link to /proc/self/pagemap (296 s)."""
    model = folder / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"\x08\x01")
    (model / "variables" / "variables.index").symlink_to("/proc/self/pagemap")
    return ["run", model, _tensor(folder), "--cache", folder / "cache", "--repeats", "1"]


def _config_bomb(folder: Path) -> list[object]:
    """A .keras of under a megabyte whose config.json inflates to 512 MiB."""
    model = folder / "bomb.keras"
    with zipfile.ZipFile(model, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata.json", '{"keras_version": "3.0.0"}')
        with archive.open("config.json", "w", force_zip64=True) as member:
            member.write(b"[" + b" " * ((512 << 20) - 2) + b"]")
    return ["run", model, demo_images()[0], "--cache", folder / "cache", "--repeats", "1"]


def _postscript_named_png(folder: Path) -> list[object]:
    """An EPS file named .png: Pillow's EPS plug-in would hand it to Ghostscript."""
    image = folder / "cell.png"
    image.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\nshowpage\n")
    return ["run", demo_model(), image, "--cache", folder / "cache", "--repeats", "1"]


def _lying_png(path: Path, side: int) -> None:
    """A PNG of a few KB whose header claims ``side``² RGBA pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 4096)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


def _lying_headers(folder: Path) -> list[object]:
    """Eight 4 KB PNGs whose headers claim 16384×16384 RGBA each."""
    images = folder / "images"
    images.mkdir()
    for index in range(8):
        _lying_png(images / f"tile_{index}.png", 16384)
    return ["run", demo_model(), images, "--cache", folder / "cache", "--repeats", "1"]


INPUT_CASES = [
    InputCase("untrusted SavedModel linked to /proc", _saved_model_linked_to_proc),
    InputCase(".keras whose config inflates to 512 MiB", _config_bomb),
    InputCase("EPS named .png", _postscript_named_png),
    InputCase("8 PNGs claiming 16384² RGBA", _lying_headers),
]
