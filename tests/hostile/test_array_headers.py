"""What an array file's header holds is data, never code, and what it declares is bounded
before a byte of its values is read (held cases of the review, kept here). A
``.npy`` header is a Python literal: one that is code instead (``__import__('os')…``), or that
declares Python objects (a pickle), is refused in one line naming the file wherever a user
gives it, an input image, a ground-truth mask, a map or an ``.npz``'s member, and the code
never runs. A map whose header declares terabytes in a few bytes is refused from its header,
in this process's memory as it is plus a bounded headroom, and nothing is stored."""

from __future__ import annotations

import io
import re
import shutil
import struct
import zipfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import tifffile

from segdiff_gui.resources import demo_dir
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here
from tests.hostile.expect import bounded_memory
from tests.hostile.user_files import MAP_SIDE

pytestmark = pytest.mark.timeout(120, method="thread")


def _npy_with_header(text: str, values: np.ndarray) -> bytes:
    """An ``.npy`` (version 1.0) whose header is ``text`` exactly, then ``values``' bytes."""
    body = text.encode("latin1")
    pad = -(10 + len(body) + 1) % 64
    header = body + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + values.tobytes()


def _code_header(marker: Path, shape: tuple[int, ...]) -> str:
    """A header whose dtype is an expression that would write ``marker`` if it were run."""
    code = f"__import__('pathlib').Path({str(marker)!r}).write_text('ran') and '<f4'"
    return f"{{'descr': {code}, 'fortran_order': False, 'shape': {shape}, }}"


def _pickled(shape: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.full(shape, None, dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _npz(path: Path, member: bytes) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("map.npy", member)


def _one_line(result, path: Path, problem: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"segdiff: {path}") and re.search(problem, line), line
    assert "object at 0x" not in line, line  # a Python object's repr says nothing to a user


# Where a user gives an array file, and what is said of a header of code or of objects there.
CODE = r"its header is not a literal description of an array; segdiff never runs code"
OBJECTS = r"holds Python objects|Object arrays cannot be loaded when allow_pickle=False"
CASES = {
    "code in an image's header": ("image", "code", CODE),
    "code in a mask's header": ("mask", "code", CODE),
    "code in a map's header": ("map", "code", CODE),
    "code in an .npz member's header": ("npz", "code", CODE),
    "a pickle in an .npz member": ("npz", "pickle", OBJECTS),
    "a pickle as a mask": ("mask", "pickle", OBJECTS),
}


@pytest.mark.parametrize("case", CASES)
def test_an_array_header_of_code_or_objects_is_one_line_and_never_run(
    case, demo, tmp_path, capsys, fake_engine
):
    """Each is given to the command that reads it: ``run`` an image, ``run --sweep --masks``
    a mask (checked against the images before any run), ``import`` a map. numpy reads a
    header with ``ast.literal_eval``, which refuses code: its refusal said the header was a
    "malformed node or string … <ast.BoolOp object at 0x…>"."""
    model, images = demo
    where, payload, said = CASES[case]
    marker = tmp_path / "code-ran"
    side = (MAP_SIDE, MAP_SIDE)
    content = (
        _npy_with_header(_code_header(marker, side), np.zeros(side, np.float32))
        if payload == "code"
        else _pickled(side)
    )
    cache = tmp_path / "cache"
    common = ("--cache", cache, "--repeats", "1", "--config", "batch=1")
    if where == "image":
        given = tmp_path / "image.npy"
        given.write_bytes(content)
        result = segdiff_here(capsys, "run", model, given, *common)
    elif where == "mask":
        masks = tmp_path / "masks"
        masks.mkdir()
        given = masks / f"{images[0].stem}.npy"
        given.write_bytes(content)
        result = segdiff_here(capsys, "run", model, images[0], *common, "--sweep",
                              "--masks", masks)  # fmt: skip
    elif where == "map":
        given = tmp_path / "map.npy"
        given.write_bytes(content)
        result = segdiff_here(capsys, "import", given, "--model", model, "--image", images[0],
                              "--cache", cache)  # fmt: skip
    else:
        given = tmp_path / "maps.npz"
        _npz(given, content)
        result = segdiff_here(capsys, "import", given, "--model", model, "--image", images[0],
                              "--cache", cache)  # fmt: skip
    _one_line(result, given, said)
    assert not marker.exists()
    assert not ResultCache(cache).keys()


def _npy_declaring(path: Path, shape: tuple[int, ...]) -> None:
    """An ``.npy`` of 128 bytes whose header declares float32 values of ``shape``."""
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"
    path.write_bytes(_npy_with_header(text, np.zeros(0, np.float32)))


def _npy_header_of_4_gib(path: Path) -> None:
    """A version 3 ``.npy`` whose header declares 4 GiB of itself: numpy read (allocated) it
    whole before it measured it against its own bound of 10,000 bytes."""
    start = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }"
    path.write_bytes(b"\x93NUMPY\x03\x00" + struct.pack("<I", 0xFFFFFFF0) + start.encode())


def _tiff_declaring(path: Path, side: int) -> None:
    """A tiled float TIFF of 256² whose header claims ``side``² (4·side² bytes decoded)."""
    tifffile.imwrite(path, np.zeros((256, 256), np.float32), tile=(256, 256), compression="zlib")
    with open(path, "r+b") as handle, tifffile.TiffFile(handle) as tiff:
        for name in ("ImageWidth", "ImageLength"):
            tiff.pages[0].tags[name].overwrite(side)


LIMIT = "over segdiff's limit"
HEADER_OF_4_GIB = "its header declares 4,294,967,280 bytes, over numpy's bound of 10,000"
# Where the file is given, its name, how it is made, and what is said of it.
BOMBS = {
    "an .npy map of 10⁶×10⁶": (
        "map",
        "bomb.npy",
        partial(_npy_declaring, shape=(10**6,) * 2),
        LIMIT,
    ),
    "an .npy batch of 10⁹ maps": (
        "map",
        "batch.npy",
        partial(_npy_declaring, shape=(10**9, MAP_SIDE, MAP_SIDE)),
        LIMIT,
    ),
    "a float TIFF map of 60000²": ("map", "bomb.tif", partial(_tiff_declaring, side=60_000), LIMIT),
    "an .npy map's header of 4 GiB": ("map", "header.npy", _npy_header_of_4_gib, HEADER_OF_4_GIB),
    "an .npy image's header of 4 GiB": (
        "image",
        "header.npy",
        _npy_header_of_4_gib,
        HEADER_OF_4_GIB,
    ),
    "an .npy mask of 10⁶×10⁶": (
        "mask",
        "bomb.npy",
        partial(_npy_declaring, shape=(10**6,) * 2),
        LIMIT,
    ),
}


@pytest.mark.parametrize("case", BOMBS)
def test_a_header_declaring_terabytes_is_refused_from_the_header(
    case, demo, tmp_path, capsys, fake_engine
):
    """Each in this process's memory as it is plus a bounded headroom: an allocation of what
    a header declares fails the case. A mask is read as an image is, and the masks are
    checked against the images before any run."""
    model, images = demo
    where, name, write, said = BOMBS[case]
    cache = tmp_path / "cache"
    common = ("--cache", cache, "--repeats", "1", "--config", "batch=1")
    if where == "mask":
        masks = tmp_path / "masks"
        masks.mkdir()
        shutil.copy(demo_dir() / "masks" / images[1].name, masks)
        given = masks / f"{images[0].stem}{Path(name).suffix}"
    else:
        given = tmp_path / name
    write(given)
    assert given.stat().st_size < 64 << 10
    with bounded_memory():
        if where == "map":
            result = segdiff_here(capsys, "import", given, "--model", model, "--image",
                                  images[0], "--cache", cache)  # fmt: skip
        elif where == "image":
            result = segdiff_here(capsys, "run", model, given, *common)
        else:
            result = segdiff_here(capsys, "run", model, *images[:2], *common, "--sweep",
                                  "--masks", masks)  # fmt: skip
    _one_line(result, given, said)
    assert not ResultCache(cache).keys()
