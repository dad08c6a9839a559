"""Hostile files a user is handed and gives segdiff as their own: maps to import or
reproduce, input images, ground-truth masks. Each is crafted the way an attacker or a failing
disk would make it, byte by byte where a library would refuse to write it."""

from __future__ import annotations

import io
import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tifffile

MAP_SIDE = 256  # the demo images' side: the fake engine's map of one is 256×256


@dataclass(frozen=True)
class ZipMember:
    """One member as it is stored: its bytes (deflated where ``method`` is 8), what they
    inflate to and its checksum, as the archive declares them."""

    name: str
    data: bytes
    size: int
    crc: int
    method: int = 0  # 0 stored, 8 deflated
    flags: int = 0  # bit 0: encrypted


def stored(name: str, payload: bytes) -> ZipMember:
    return ZipMember(name, payload, len(payload), zlib.crc32(payload))


def write_zip(path: Path, members: list[ZipMember]) -> None:
    """A zip archive of ``members`` exactly as given (the local headers, the central
    directory and its end record), whatever its methods, flags and checksums say."""
    body, directory = bytearray(), bytearray()
    for member in members:
        offset, name = len(body), member.name.encode()
        fields = (member.flags, member.method, 0, 0x21, member.crc, len(member.data), member.size)
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, *fields, len(name), 0) + name
        body += member.data
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, *fields, len(name),
                                 0, 0, 0, 0, 0, offset) + name  # fmt: skip
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                      len(directory), len(body), 0)  # fmt: skip
    path.write_bytes(bytes(body + directory + end))


def npy_header(shape: tuple[int, ...]) -> bytes:
    """The header ``np.save`` writes before float32 values of ``shape``."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return out.getvalue()


def deflated_zeros(name: str, shape: tuple[int, ...]) -> ZipMember:
    """An ``.npy`` member of float32 zeros of ``shape``, deflated: a GiB of values takes about
    a MB. Deflate after a full flush starts afresh, so one compressed block (up to a MiB) is
    repeated."""
    header, size = npy_header(shape), int(np.prod(shape)) * 4
    block = math.gcd(size, 1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    piece = compressor.compress(bytes(block)) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.flush(zlib.Z_FINISH)
    crc = zlib.crc32(header)
    zeros = bytes(block)
    for _ in range(size // block):
        crc = zlib.crc32(zeros, crc)
    data = head + piece * (size // block) + tail
    return ZipMember(name, data, len(header) + size, crc, method=8)


def ome_tiff_naming(path: Path, other: Path) -> None:
    """An OME-TIFF of two planes of MAP_SIDE²: the first its own (0.5), the second, its
    metadata says, the first page of ``other`` (0.25 there, 0.75 in its corner), by absolute
    path: tifffile reads it plane by plane from there."""
    secret = np.full((MAP_SIDE, MAP_SIDE), 0.25, np.float32)
    secret[0, 0] = 0.75
    tifffile.imwrite(other, secret)
    ome = f"""<?xml version="1.0" encoding="UTF-8"?>
<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06"
     UUID="urn:uuid:11111111-1111-1111-1111-111111111111">
<Image ID="Image:0"><Pixels ID="Pixels:0" DimensionOrder="XYCZT" Type="float"
 SizeX="{MAP_SIDE}" SizeY="{MAP_SIDE}" SizeC="1" SizeZ="2" SizeT="1">
<Channel ID="Channel:0:0" SamplesPerPixel="1"/>
<TiffData IFD="0" PlaneCount="1" FirstZ="0"/>
<TiffData IFD="0" PlaneCount="1" FirstZ="1"><UUID FileName="{other}"
 >urn:uuid:22222222-2222-2222-2222-222222222222</UUID></TiffData>
</Pixels></Image></OME>"""
    own = np.full((MAP_SIDE, MAP_SIDE), 0.5, np.float32)
    tifffile.imwrite(path, own, description=ome, metadata=None)


def float_tiff_compressed_by(path: Path, code: int) -> None:
    """A float32 map of MAP_SIDE² whose Compression tag names ``code``: a codec tifffile does
    not know (50123), or one it needs imagecodecs for (34887, LERC)."""
    tifffile.imwrite(path, np.full((MAP_SIDE, MAP_SIDE), 0.5, np.float32))
    with tifffile.TiffFile(path) as tiff:
        entry = tiff.pages[0].tags["Compression"].offset  # its IFD entry: code, type, count, value
    data = bytearray(path.read_bytes())
    assert struct.unpack("<H", data[entry : entry + 2]) == (259,)
    data[entry + 8 : entry + 10] = struct.pack("<H", code)
    path.write_bytes(bytes(data))
