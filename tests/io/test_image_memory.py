"""What images take in memory, said from their headers before anything is decoded."""

from types import SimpleNamespace

import numpy as np
import pytest
import tifffile

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.image_memory import check_images_fit
from tests.factories import lying_png

GIB = 1 << 30


def test_the_bound_is_half_the_machines_memory_and_names_the_file_that_crosses_it(
    tmp_path, monkeypatch
):
    import psutil

    monkeypatch.delenv("SEGDIFF_MAX_IMAGE_MEMORY", raising=False)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=16 * GIB))
    first, second = lying_png(tmp_path / "a.png"), lying_png(tmp_path / "b.png")
    check_images_fit([[first], [second]])  # 5 GiB each (1 decoded, 4 as float32): alone, fit
    with pytest.raises(InputError) as refused:
        check_images_fit([[first, second]])
    assert str(refused.value) == (
        f"{second}: held in one batch with the 1 image before it, they would take 10.0 GiB, "
        "over segdiff's bound of 8.0 GiB (8,589,934,592 bytes: half of this machine's 16.0 GiB "
        "of memory); use fewer or smaller images in a batch, or set SEGDIFF_MAX_IMAGE_MEMORY "
        "to raise it"
    )


def test_every_format_is_measured_from_its_header(tmp_path, monkeypatch):
    tiff, npy = tmp_path / "f.tif", tmp_path / "d.npy"
    # 120 KB decoded and 120 KB as float32 input; 20 KB and 40 KB.
    tifffile.imwrite(tiff, np.zeros((100, 100, 3), np.float32), photometric="rgb")
    np.save(npy, np.zeros((100, 100), np.uint16))
    monkeypatch.setenv("SEGDIFF_MAX_IMAGE_MEMORY", str(240_000 + 60_000))
    check_images_fit([[tiff, npy]])
    monkeypatch.setenv("SEGDIFF_MAX_IMAGE_MEMORY", str(240_000 + 60_000 - 1))
    with pytest.raises(InputError, match=r"d\.npy: held in one batch .* set by SEGDIFF_MAX_IMA"):
        check_images_fit([[tiff, npy]])


def test_a_file_that_is_no_image_is_one_line_naming_it(tmp_path):
    bogus = tmp_path / "notes.png"
    bogus.write_text("hello")
    with pytest.raises(InputError, match=r"notes\.png: not a readable image"):
        check_images_fit([[bogus]])
