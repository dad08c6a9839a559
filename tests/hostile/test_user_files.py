"""A user's own files given to segdiff are untrusted input too. A map to import or
reproduce, an input image and a ground-truth mask are each read from their own bytes only,
within bounds, and a hostile or damaged one is one line naming it (exit 2): nothing read
outside the given file, no wait, nothing stored.

Each case is bounded in time here: a wait on a FIFO fails its case instead of holding the run
("thread": a read blocked in C never returns to Python to see a signal)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui import api
from segdiff_gui.core.errors import InputError
from segdiff_gui.io.images import read_image
from segdiff_gui.io.truth import TruthFolder
from segdiff_gui.resources import demo_dir
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff, segdiff_here
from tests.hostile.expect import assert_one_line, bounded_memory, files_under, opened_files
from tests.hostile.user_files import (
    MAP_SIDE,
    deflated_zeros,
    float_tiff_compressed_by,
    npy_header,
    ome_tiff_naming,
    stored,
    write_zip,
)

pytestmark = pytest.mark.timeout(120, method="thread")


def _imported(capsys, maps: Path, model: Path, images: list[Path], cache: Path):
    """``segdiff import MAPS --model MODEL --image …`` in this process (its inspection child
    the fake engine's)."""
    pictures = [word for image in images for word in ("--image", image)]
    return segdiff_here(capsys, "import", maps, "--model", model, *pictures, "--cache", cache)


def _one_line(result, path: Path, problem: str) -> None:
    """The command said one line naming ``path`` and ``problem`` (a regex) and exited 2."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"segdiff: {path}: ") and re.search(problem, line), line


# An OME-TIFF whose metadata names another file ----------------------------------------------------
def test_a_tiff_naming_another_file_is_refused_and_the_other_never_opened(
    demo, tmp_path, capsys, fake_engine
):
    """The review's map: two planes, the second, its OME-XML says, an absolute path's page.
    tifffile read it plane by plane, and ``import`` stored the other file's pixels as the
    user's map of the second image. The same file given as an input image or a mask was read
    the same way: one reader refuses it for all three, and never opens the other file."""
    model, images = demo
    outside = tmp_path / "outside"
    outside.mkdir()
    maps = tmp_path / "maps.ome.tif"
    ome_tiff_naming(maps, outside / "secret.tif")
    masks = tmp_path / "masks"
    masks.mkdir()
    shutil.copy(maps, masks / f"{images[0].stem}.tif")
    before, cache = files_under(outside), tmp_path / "cache"
    said = r"is an OME-TIFF whose metadata names another file \(.*secret\.tif\); segdiff reads"

    with opened_files() as opened:
        result = _imported(capsys, maps, model, images[:2], cache)
        with pytest.raises(InputError) as as_image:
            read_image(maps)
        with pytest.raises(InputError) as as_mask:
            TruthFolder(masks).read(images[0].name, (MAP_SIDE, MAP_SIDE), 2)

    _one_line(result, maps, said)
    assert_one_line(as_image.value, maps, said)
    assert_one_line(as_mask.value, masks / f"{images[0].stem}.tif", said)
    assert [path for path in opened if path.startswith(str(outside))] == []
    assert files_under(outside) == before
    assert not ResultCache(cache).keys()


# A FIFO among the ground-truth masks --------------------------------------------------------------
def test_a_fifo_among_the_masks_is_one_line_not_a_wait(demo, tmp_path, capsys, fake_engine):
    """Pillow's open waited for a writer for ever: ``run --sweep --masks`` before any run
    (its masks are checked against the images first) and ``sweep --masks`` over stored runs.
    Each command runs in a process of its own, killed if it waits."""
    model, images = demo
    masks = tmp_path / "masks"
    masks.mkdir()
    shutil.copy(demo_dir() / "masks" / images[1].name, masks)
    fifo = masks / images[0].name
    os.mkfifo(fifo)
    cache = tmp_path / "cache"
    common = (model, *images[:2], "--config", "batch=1", "--repeats", "1", "--cache", cache)

    swept = segdiff("run", *common, "--sweep", "--masks", masks, fake=True, timeout=60)
    _one_line(swept, fifo, r"is not a plain file \(a FIFO, socket or device\)$")
    assert not ResultCache(cache).keys()  # refused before anything ran

    assert segdiff_here(capsys, "run", *common).returncode == 0
    stored_runs = sorted(ResultCache(cache).keys())
    again = segdiff("sweep", "--masks", masks, "--cache", cache, fake=True, timeout=60)
    _one_line(again, fifo, r"is not a plain file \(a FIFO, socket or device\)$")
    assert sorted(ResultCache(cache).keys()) == stored_runs


# An .npz whose members declare gigabytes ----------------------------------------------------------
def test_an_npz_is_checked_from_its_headers_before_its_values_are_read(
    demo, tmp_path, capsys, fake_engine
):
    """Six members of 16384² float32 zeros (1 GiB each) in a 6 MB file were each read whole
    before any shape check; 4,096 members of the model's own shape (1 GiB together) in a 1 MB
    file, all read before they were counted against the one image. Each is refused from its
    headers, in this process's memory as it is plus a bounded headroom."""
    model, images = demo
    bomb = tmp_path / "bomb.npz"
    giant = deflated_zeros("m0.npy", (16384, 16384))
    write_zip(bomb, [dataclasses.replace(giant, name=f"m{i}.npy") for i in range(6)])
    assert bomb.stat().st_size < 8 << 20
    many = tmp_path / "many.npz"
    small = deflated_zeros("m.npy", (MAP_SIDE, MAP_SIDE))
    write_zip(many, [dataclasses.replace(small, name=f"m{i:04}.npy") for i in range(4096)])
    assert many.stat().st_size < 4 << 20
    cache = tmp_path / "cache"

    with bounded_memory():
        giants = _imported(capsys, bomb, model, images[:1], cache)
        counted = _imported(capsys, many, model, images[:1], cache)

    _one_line(giants, Path(f"{bomb} [m0]"), "has shape 16384×16384; the model's map is 256×256")
    _one_line(counted, many, r"holds 4096 map\(s\) but 1 image\(s\) were given")
    assert not ResultCache(cache).keys()


# Damaged map files --------------------------------------------------------------------------------
def _damaged_npz(path: Path, damage: str) -> None:
    """An ``.npz`` of one good map, stored, then damaged as a disk or a tool would."""
    payload = npy_header((MAP_SIDE, MAP_SIDE)) + np.full((MAP_SIDE,) * 2, 0.5, "<f4").tobytes()
    member = stored("map.npy", payload)
    if damage == "a bad CRC":
        member = dataclasses.replace(member, crc=member.crc ^ 1)
    elif damage == "an unsupported method":
        member = dataclasses.replace(member, method=99)  # AES, WinZip's
    elif damage == "a bzip2 member":  # zipfile inflates what it reads of one all at once
        member = dataclasses.replace(member, method=12)
    else:  # encrypted
        member = dataclasses.replace(member, flags=1)
    write_zip(path, [member])


DAMAGES = {
    "a bad CRC": r"\[map\]: cannot be read as a map: Bad CRC-32 for file 'map.npy'$",
    "an unsupported method": r"\[map\]: is compressed by zip method 99; numpy stores or",
    "an encrypted member": r"\[map\]: is encrypted; numpy writes an .npz's members in the",
    "a bzip2 member": r"\[map\]: is compressed by zip method 12; numpy stores or deflates",
    "an unknown TIFF codec": r": cannot be read as a map: 50123 is not a known COMPRESSION",
    "a TIFF codec not installed": r": cannot be read as a map: .*LERC.*imagecodecs",
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_map_file_is_one_line(demo, tmp_path, capsys, fake_engine, damage):
    """Each was an internal error (exit 3, a traceback's last line), where the same file
    given as an input image was one line. A bzip2 member is refused from the zip directory
    too: zipfile inflates each few KB it reads of one whole, gigabytes from a header's read."""
    model, images = demo
    if "TIFF" in damage:
        maps = tmp_path / "map.tif"
        float_tiff_compressed_by(maps, 50123 if "unknown" in damage else 34887)
    else:
        maps = tmp_path / "map.npz"
        _damaged_npz(maps, damage)
    cache = tmp_path / "cache"
    result = _imported(capsys, maps, model, images[:1], cache)
    assert result.returncode == 2, (result.returncode, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"segdiff: {maps}") and re.search(DAMAGES[damage], line), line
    assert not ResultCache(cache).keys()


# The API's reproduce of an array ------------------------------------------------------------------
@pytest.mark.parametrize(
    "values, said",
    [
        (np.full((MAP_SIDE, MAP_SIDE), np.nan, np.float32), "holds 65,536 NaN or infinite"),
        (np.full((MAP_SIDE, MAP_SIDE), 2.0, np.float32), r"values span \[2, 2\]: not probab"),
    ],
    ids=["all NaN", "all 2.0"],
)
def test_the_apis_reproduce_checks_an_array_as_it_checks_a_file(
    demo, tmp_path, fake_engine, values, said
):
    """An array skipped the checks a file's map is given: an all-NaN map was 'nearest … at 0
    ULP' and one of 2.0 searched for. Both paths are refused in the same words, before any
    child starts."""
    model, images = demo
    cache = tmp_path / "cache"
    np.save(tmp_path / "map.npy", values)
    for given, where in ((values, "map"), (tmp_path / "map.npy", str(tmp_path / "map.npy"))):
        with pytest.raises(api.InputError) as refused:
            api.reproduce(given, model, images[:1], cache=cache, progress=False)
        assert_one_line(refused.value, Path(where), said)
    assert not ResultCache(cache).keys()
