import struct
import zlib

import numpy as np
import pytest
import tifffile
from PIL import Image

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.images import collect_images, read_image


def test_png_8_and_16_bit(tmp_path):
    gray = np.arange(64, dtype=np.uint8).reshape(8, 8)
    Image.fromarray(gray).save(tmp_path / "g.png")
    deep = (np.arange(64, dtype=np.uint16) * 1000).reshape(8, 8)
    Image.fromarray(deep).save(tmp_path / "d.png")
    assert np.array_equal(read_image(tmp_path / "g.png"), gray)
    read = read_image(tmp_path / "d.png")
    assert read.dtype == np.uint16 and np.array_equal(read, deep)


def test_tiff_float_and_channels_first_npy(tmp_path):
    data = np.random.default_rng(1).random((6, 5), dtype=np.float32)
    tifffile.imwrite(tmp_path / "f.tif", data)
    assert np.array_equal(read_image(tmp_path / "f.tif"), data)
    chw = np.zeros((3, 6, 5), dtype=np.uint8)
    np.save(tmp_path / "c.npy", chw)
    assert read_image(tmp_path / "c.npy").shape == (6, 5, 3)


def test_not_an_image_is_one_clear_line(tmp_path):
    bogus = tmp_path / "notes.png"
    bogus.write_text("hello")
    with pytest.raises(InputError, match=r"notes.png: not a readable image"):
        read_image(bogus)


def _png(width, height, depth=8, colour=0, pixel_rows=b""):
    """A PNG written by hand: its header may claim what Pillow would never write."""

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    data = chunk(b"IDAT", zlib.compress(pixel_rows)) if pixel_rows else b""
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + data + chunk(b"IEND", b"")


@pytest.mark.parametrize(
    "name, damage",
    [
        ("cut.png", lambda good: good[: len(good) // 2]),  # truncated
        ("crc.png", lambda good: good[:40] + bytes([good[40] ^ 0xFF]) + good[41:]),
        ("cut.tif", lambda good: good[:60]),
        # Neither an OSError nor a ValueError: a header that ends inside its dictionary, and a
        # PNG whose header claims 20000 × 20000 pixels (Pillow's decompression-bomb guard).
        (
            "header.npy",
            lambda good: good[:10] + b"{'descr': '<u2', 'shape': (4" + b" " * 30 + b"\n",
        ),
        ("bomb.png", lambda good: _png(20_000, 20_000)),
    ],
)
def test_a_damaged_file_is_one_clear_line_whatever_the_decoder_raises(tmp_path, name, damage):
    path = tmp_path / name
    pixels = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    if name.endswith(".npy"):
        np.save(path, pixels)
    elif name.endswith(".tif"):
        import tifffile

        tifffile.imwrite(path, pixels)
    else:
        Image.fromarray(pixels.astype(np.uint8)).save(path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(InputError, match=name.replace(".", r"\.")):
        read_image(path)
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(InputError, match="folder.png: no such image file"):
        read_image(tmp_path / "folder.png")


def test_pickled_npy_is_refused(tmp_path):
    np.save(tmp_path / "p.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="p.npy"):
        read_image(tmp_path / "p.npy")


def test_collect_images_expands_folders_in_name_order(tmp_path):
    for name in ("b.png", "a.png"):
        Image.fromarray(np.zeros((2, 2), dtype=np.uint8)).save(tmp_path / name)
    (tmp_path / "readme.txt").write_text("x")
    assert [p.name for p in collect_images([tmp_path])] == ["a.png", "b.png"]
    with pytest.raises(InputError, match="no such file"):
        collect_images([tmp_path / "missing.png"])


def test_sixteen_bit_colour_png_is_refused_not_truncated(tmp_path):
    height = width = 2
    rows = b"".join(b"\x00" + b"\xf0\x00" * 3 * width for _ in range(height))
    png = _png(width, height, depth=16, colour=2, pixel_rows=rows)
    (tmp_path / "deep.png").write_bytes(png)
    with pytest.raises(InputError, match="deep.png: is a 16-bit colour PNG") as refused:
        read_image(tmp_path / "deep.png")
    assert "cannot be read" not in str(refused.value)  # said once, not wrapped again


def _lying_tiff(path):
    """A tiled deflate TIFF of 256² whose header claims 50000² (decoding it would take 2.5 GB)."""
    tifffile.imwrite(path, np.zeros((256, 256), np.uint8), tile=(256, 256), compression="zlib")
    with open(path, "r+b") as handle, tifffile.TiffFile(handle) as tiff:
        for name in ("ImageWidth", "ImageLength"):
            tiff.pages[0].tags[name].overwrite(50_000)


def _lying_npy(path):
    np.save(path, np.zeros((4, 4), np.float32))
    data = path.read_bytes().replace(b"(4, 4)", b"(99999, 99999)".ljust(6))
    path.write_bytes(data)


@pytest.mark.parametrize(
    "name, write",
    [
        ("huge.png", lambda path: path.write_bytes(_png(30_000, 30_000))),
        ("huge.tif", _lying_tiff),
        ("huge.npy", _lying_npy),
    ],
)
def test_a_header_over_the_pixel_limit_is_refused_before_decoding(tmp_path, name, write):
    import resource

    path = tmp_path / name
    write(path)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match=rf"{name}: .* over segdiff's limit .*SEGDIFF_MAX_PIXELS"):
        read_image(path)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000  # nothing near the 0.9–10 GB those headers claim


def test_the_pixel_limit_can_be_raised_and_lowered(tmp_path, monkeypatch):
    Image.fromarray(np.zeros((100, 100), np.uint8)).save(tmp_path / "a.png")
    monkeypatch.setenv("SEGDIFF_MAX_PIXELS", "5000")
    with pytest.raises(InputError, match="100×100 pixels is over segdiff's limit of 5,000"):
        read_image(tmp_path / "a.png")
    monkeypatch.setenv("SEGDIFF_MAX_PIXELS", "10000")
    assert read_image(tmp_path / "a.png").shape == (100, 100)


def test_pillows_own_limit_is_left_as_the_process_had_it(tmp_path, monkeypatch):
    """segdiff's pixel bound stands in for Pillow's only while segdiff opens a file: a
    notebook's own limit (here 100 pixels) still guards its own images afterwards, and
    segdiff's images are held to segdiff's bound, not to the notebook's."""
    from segdiff_gui.io.images import read_header

    Image.fromarray(np.zeros((100, 100), np.uint8)).save(tmp_path / "a.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    assert read_image(tmp_path / "a.png").shape == (100, 100)
    assert read_header(tmp_path / "a.png").shape == (100, 100, 1)
    assert Image.MAX_IMAGE_PIXELS == 100
    with pytest.raises(Image.DecompressionBombError):
        Image.open(tmp_path / "a.png")
    # Over twice segdiff's bound, Pillow refuses the open itself: the same one line.
    monkeypatch.setenv("SEGDIFF_MAX_PIXELS", "4000")
    with pytest.raises(InputError, match=r"a\.png: image is over segdiff's limit of 4,000 pix"):
        read_image(tmp_path / "a.png")
    assert Image.MAX_IMAGE_PIXELS == 100


def test_decoder_warnings_do_not_reach_stderr(tmp_path, capfd):
    # A TIFF with a tag pointing past the end of the file: tifffile skips the tag and logs an
    # error on stderr. The image reads; the log line must not reach segdiff's output.
    path = tmp_path / "odd.tif"
    tifffile.imwrite(path, np.zeros((8, 8), np.uint8), description="x" * 100)
    data = bytearray(path.read_bytes())
    (ifd,) = struct.unpack("<I", data[4:8])
    (count,) = struct.unpack("<H", data[ifd : ifd + 2])
    for entry in range(ifd + 2, ifd + 2 + 12 * count, 12):
        if struct.unpack("<H", data[entry : entry + 2])[0] == 270:  # ImageDescription
            data[entry + 8 : entry + 12] = struct.pack("<I", 10**8)
    path.write_bytes(bytes(data))
    assert read_image(path).shape == (8, 8)
    assert capfd.readouterr().err == ""
