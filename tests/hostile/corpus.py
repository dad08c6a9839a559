"""A corpus of hostile input, built with h5py the way an attacker or a failing disk would: each
bundle case is a good bundle of three runs with one run crafted, each cache case a good cache
with one entry damaged. What the tests expect of every case: exit code 2, one line naming the
file, the other runs still shown, nothing outside read or deleted, memory and time bounded."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from segdiff_gui.storage import ResultCache, write_bundle
from tests.factories import IMAGE_HASH, make_record

SECRET = b"segdiff-test-secret: this file is outside every cache\n" * 80


@dataclass(frozen=True)
class Case:
    name: str
    craft: Callable[[Path, Path], None]  # (file to craft, a folder outside every cache)
    problem: str  # a regex the one line says


def base_cache(root: Path) -> tuple[ResultCache, list[str]]:
    """Three runs of one model and image (two comparable with the reference), and the image."""
    cache = ResultCache(root)
    values = np.linspace(0.3, 0.7, 32 * 32, dtype=np.float32).reshape(32, 32)
    records = [
        make_record("m", values, "cpu b1 r0"),
        make_record("m", values, "cpu b1 r1"),
        make_record("m", np.nextafter(values, np.float32(1)), "cpu b4 r0"),
    ]
    for record in records:
        cache.write_run(record)
    cache.write_image(IMAGE_HASH, "t.png", (values * 255).astype(np.uint8))
    return cache, [record.key for record in records]


def base_bundle(path: Path, scratch: Path) -> list[str]:
    cache, keys = base_cache(scratch / "bundle-source")
    write_bundle(cache, keys, path)
    return keys


# crafting ----------------------------------------------------------------------------------
def _victim(handle: h5py.File) -> h5py.Group:
    """The run the case crafts: the batch-4 one (the reference and its repeat stay good)."""
    for key in handle["runs"]:
        if json.loads(handle["runs"][key].attrs["config"])["batch"] == 4:
            return handle["runs"][key]
    raise LookupError("no batch-4 run")


def _secret(outside: Path) -> Path:
    path = outside / "secret.txt"
    path.write_bytes(SECRET)
    return path


def _replace_map(group: h5py.Group, **options) -> None:
    del group["probabilities"]
    group.create_dataset("probabilities", **options)


def _edit_run(edit: Callable[[h5py.Group, Path], None]) -> Callable[[Path, Path], None]:
    def craft(path: Path, outside: Path) -> None:
        with h5py.File(path, "r+") as handle:
            edit(_victim(handle), outside)

    return craft


def _attribute(name: str, value: object) -> Callable[[Path, Path], None]:
    def edit(group: h5py.Group, outside: Path) -> None:
        del group.attrs[name]
        group.attrs[name] = value

    return _edit_run(edit)


def _config(**changes: object) -> Callable[[Path, Path], None]:
    def edit(group: h5py.Group, outside: Path) -> None:
        config = {**json.loads(group.attrs["config"]), **changes}
        group.attrs["config"] = json.dumps(config)

    return _edit_run(edit)


def _external_storage(group: h5py.Group, outside: Path) -> None:
    secret = _secret(outside)
    _replace_map(group, shape=(32, 32), dtype="<f4", external=[(str(secret), 0, 4096)])


def _external_fifo(group: h5py.Group, outside: Path) -> None:
    fifo = outside / "fifo"
    os.mkfifo(fifo)
    _replace_map(group, shape=(32, 32), dtype="<f4", external=[(str(fifo), 0, 4096)])


def _external_link(group: h5py.Group, outside: Path) -> None:
    other = outside / "other.h5"
    with h5py.File(other, "w") as handle:
        handle["secret"] = np.frombuffer(SECRET[:4096], dtype="<f4").reshape(32, 32)
    del group["probabilities"]
    group["probabilities"] = h5py.ExternalLink(str(other), "/secret")


def _soft_link(group: h5py.Group, outside: Path) -> None:
    del group["probabilities"]
    group["probabilities"] = h5py.SoftLink("/images/" + IMAGE_HASH)


def _soft_link_loop(path: Path, outside: Path) -> None:
    with h5py.File(path, "r+") as handle:
        group = _victim(handle)
        name = group.name
        del handle[name]
        handle[name] = h5py.SoftLink(name)


def _virtual(group: h5py.Group, outside: Path) -> None:
    layout = h5py.VirtualLayout(shape=(32, 32), dtype="<f4")
    layout[:] = h5py.VirtualSource(str(outside / "missing.h5"), "map", shape=(32, 32))
    del group["probabilities"]
    group.create_virtual_dataset("probabilities", layout, fillvalue=0.5)


def _map_of(dtype: object, shape: tuple[int, ...] = (32, 32)) -> Callable[[Path, Path], None]:
    def edit(group: h5py.Group, outside: Path) -> None:
        data = np.zeros(shape, dtype=np.float64).astype(dtype) if shape else None
        _replace_map(group, data=data, chunks=True, compression="gzip", shuffle=True)

    return _edit_run(edit)


def _compound(group: h5py.Group, outside: Path) -> None:
    data = np.zeros((32, 32), dtype=[("a", "<f4"), ("b", "<i4")])
    _replace_map(group, data=data, chunks=True, compression="gzip")


def _vlen(group: h5py.Group, outside: Path) -> None:
    _replace_map(group, shape=(32, 32), dtype=h5py.vlen_dtype(np.float32), chunks=(8, 8))


def _declared(shape: tuple[int, int]) -> Callable[[Path, Path], None]:
    """A huge map that stores almost nothing: one value, or no chunk at all."""

    def edit(group: h5py.Group, outside: Path) -> None:
        chunks = (256, 256)
        _replace_map(group, shape=shape, dtype="<f4", chunks=chunks, compression="gzip",
                     shuffle=True, fillvalue=0.5)  # fmt: skip
        group["probabilities"][:256, :256] = 0.5
        group.attrs["raw_output_shape"] = json.dumps([4, *shape, 1])

    return _edit_run(edit)


def _gzip_bomb(group: h5py.Group, outside: Path) -> None:
    import zlib

    _replace_map(group, shape=(32, 32), dtype="<f4", chunks=(32, 32), compression="gzip",
                 shuffle=True)  # fmt: skip
    group["probabilities"].id.write_direct_chunk((0, 0), zlib.compress(b"\0" * 2**24, 9))


def _copied_to_a_new_key(path: Path, outside: Path) -> None:
    """The forgery: a GPU run copied under a new key, claiming to be this machine's cpu b1."""
    with h5py.File(path, "r+") as handle:
        victim = _victim(handle)
        forged = "f0" * 32
        handle.copy(victim, f"/runs/{forged}")
        handle["runs"][forged].attrs["key"] = forged
        handle["runs"][forged].attrs["label"] = "cpu b1 r0"
        del handle["runs"][forged].attrs["checksum"]  # a forger leaves out what would tell


def _deep_json(group: h5py.Group, outside: Path) -> None:
    provenance = group["provenance"]
    provenance.attrs["nested"] = "[" * 100_000 + "]" * 100_000
    encoded = json.loads(provenance.attrs["_json_encoded"])
    provenance.attrs["_json_encoded"] = json.dumps([*encoded, "nested"])


def _many_attributes(group: h5py.Group, outside: Path) -> None:
    """Reading every attribute of a crafted header is a CPU bomb; the count is read first."""
    for index in range(2000):
        group["provenance"].attrs[f"a{index}"] = index


def _bytes_named_attribute(group: h5py.Group, outside: Path) -> None:
    # h5py gives a name that is not UTF-8 as bytes: sorting names mixed bytes and text.
    group["provenance"].attrs.create(b"\xff\xfe", 1)


def _bytes_named_run(path: Path, outside: Path) -> None:
    with h5py.File(path, "r+") as handle:
        handle["runs"][b"\xff" * 64] = _victim(handle)


def _classes_past_the_bound(group: h5py.Group, outside: Path) -> None:
    """A softmax map of 2048² × 256 classes (4 GiB) declared in a few bytes: H×W alone is
    within the pixel bound."""
    group.attrs["kind"] = "softmax"
    _replace_map(group, shape=(2048, 2048, 256), dtype="<f4", chunks=(64, 64, 256),
                 compression="gzip", shuffle=True)  # fmt: skip


def _duplicate_chunk_offsets(path: Path, outside: Path) -> None:
    """A chunk index naming one chunk's place twice: half the map was never written, and held
    whatever memory held before (HDF5's own B-tree bytes, merged as probabilities)."""
    import struct

    with h5py.File(path, "r+") as handle:
        victim = _victim(handle)
        del victim["probabilities"]
        victim.create_dataset("probabilities", data=np.full((32, 32), 0.25, "<f4"),
                              chunks=(32, 16), compression="gzip", shuffle=True)  # fmt: skip
        del victim.attrs["checksum"]  # a forger leaves out what would tell
    data = bytearray(path.read_bytes())
    key = struct.pack("<QQQ", 0, 16, 0)  # the version-1 B-tree key of chunk (0, 16)
    at = data.index(key)
    data[at : at + 24] = struct.pack("<QQQ", 0, 0, 0)
    path.write_bytes(bytes(data))


def json_provenance(name: str, text: str) -> Callable[[Path, Path], None]:
    def edit(group: h5py.Group, outside: Path) -> None:
        provenance = group["provenance"]
        provenance.attrs[name] = text
        encoded = json.loads(provenance.attrs["_json_encoded"])
        provenance.attrs["_json_encoded"] = json.dumps([*encoded, name])
        del group.attrs["checksum"]

    return _edit_run(edit)


def flip_a_byte_of(what: str) -> Callable[[Path, Path], None]:
    """Damage as a disk does it: one byte of the map's stored chunk, or of an attribute."""

    def craft(path: Path, outside: Path) -> None:
        with h5py.File(path, "r") as handle:
            group = _victim(handle) if "runs" in handle else handle
            if what == "map":
                info = group["probabilities"].id.get_chunk_info(0)
                offset = info.byte_offset + info.size // 2
            else:
                offset = None
        data = bytearray(path.read_bytes())
        if offset is None:  # the label: find its text in the file
            offset = data.index(b"cpu b4 r0") if b"cpu b4 r0" in data else data.index(b"cpu b")
            data[offset] = ord("X")
        else:
            data[offset] ^= 0x40
        path.write_bytes(bytes(data))

    return craft


def _no_group(name: str) -> Callable[[Path, Path], None]:
    def craft(path: Path, outside: Path) -> None:
        with h5py.File(path, "r+") as handle:
            del handle[name]

    return craft


def _attribute_of_file(name: str, value: str) -> Callable[[Path, Path], None]:
    def craft(path: Path, outside: Path) -> None:
        with h5py.File(path, "r+") as handle:
            handle.attrs[name] = value

    return craft


BUNDLE_CASES = [
    Case("external raw storage", _edit_run(_external_storage), "keeps its bytes in external"),
    Case("external storage on a FIFO", _edit_run(_external_fifo), "keeps its bytes in external"),
    Case("external link", _edit_run(_external_link), "is a link to another file"),
    Case("soft link", _edit_run(_soft_link), "is a soft link"),
    Case("soft-link loop", _soft_link_loop, "is a soft link"),
    Case("virtual dataset", _edit_run(_virtual), "is a virtual dataset"),
    Case("run copied to a new key", _copied_to_a_new_key, "does not match its own recorded"),
    Case("config as a list", _attribute("config", "[1, 2]"), "'config' is a list"),
    Case("config as a string", _attribute("config", '"cpu"'), "'config' is a str"),
    Case("batch 'x'", _config(batch="x"), "gives batch as a str"),
    Case("device 5", _config(device=5), "gives device as a int"),
    Case("an unforced choice as a switch", _config(inference_precision=True), "as a bool"),
    Case("an unforced choice out of its values", _config(inference_precision="x"), "f32, bf16"),
    Case("repeat as text", _attribute("repeat", "zero"), "'repeat' is a str"),
    Case("integer map", _map_of(np.int32), "<i4 values"),
    Case("float16 map", _map_of(np.float16), "<f2 values"),
    Case(
        "float64 map of a float32 run",
        _map_of(np.float64),
        "<f8 values; segdiff stores a float32 run's map as little-endian float32",
    ),
    Case("bool map", _map_of(np.bool_), "\\|b1 values"),
    Case("big-endian map", _map_of(">f4"), ">f4 values"),
    Case("compound map", _edit_run(_compound), "values"),
    Case("vlen map", _edit_run(_vlen), "values"),
    Case("empty 0×0 map", _map_of(np.float32, (0, 0)), "has shape \\[0, 0\\]"),
    Case("40000² map of one value", _declared((40000, 40000)), "over segdiff's limit"),
    Case("10⁶×10⁶ map", _declared((10**6, 10**6)), "over segdiff's limit"),
    Case("gzip bomb", _edit_run(_gzip_bomb), "does not inflate to its size"),
    Case("deeply nested JSON", _edit_run(_deep_json), "nests too deeply"),
    Case(
        "2,000 provenance attributes",
        _edit_run(_many_attributes),
        # Said once, as it is: not as "damage" around its own line.
        r"^(?!.*is damaged).*: provenance holds 2,0\d\d attributes \(segdiff writes <100\)",
    ),
    Case("an attribute named in bytes", _edit_run(_bytes_named_attribute), "name is not text"),
    Case("a run named in bytes", _bytes_named_run, "a run whose name is not text"),
    Case("4 GiB of classes", _edit_run(_classes_past_the_bound), "GiB, over segdiff's limit"),
    Case("duplicate chunk offsets", _duplicate_chunk_offsets, "chunk index is damaged"),
    Case(
        "a lone surrogate in the host name",
        json_provenance("hostname", json.dumps("evil\udcff")),
        "not text \\(lone surrogates\\)",
    ),
    Case("a flipped byte in a map", flip_a_byte_of("map"), "damaged chunk|map does not match"),
    Case("a flipped byte in a label", flip_a_byte_of("label"), "do not match their checksum"),
    Case("an oversized attribute", _attribute("label", "x" * (2 << 20)), "more than segdiff"),
]

# Bundles broken as a whole: nothing in them can be shown.
WHOLE_BUNDLE_CASES = [
    Case("no /runs group", _no_group("runs"), "has no /runs"),
    Case("not a bundle", _attribute_of_file("format", "something-else"), "not a segdiff bundle"),
]


# cache entries -----------------------------------------------------------------------------
def _entry_of(cache: ResultCache, keys: list[str]) -> Path:
    """The batch-4 run's file, the one each cache case damages."""
    return cache.run_path(keys[2])


def _truncate(path: Path, outside: Path) -> None:
    path.write_bytes(path.read_bytes()[:1500])


def _zero(path: Path, outside: Path) -> None:
    path.write_bytes(b"")


def _bad_superblock(path: Path, outside: Path) -> None:
    data = bytearray(path.read_bytes())
    data[8:40] = b"\xff" * 32
    path.write_bytes(bytes(data))


def _directory(path: Path, outside: Path) -> None:
    path.unlink()
    path.mkdir()


def _dangling(path: Path, outside: Path) -> None:
    path.unlink()
    path.symlink_to(outside / "gone.h5")


def _fifo(path: Path, outside: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _link_to_another_run(path: Path, outside: Path) -> None:
    other = next(p for p in path.parent.parent.glob("*/*.h5") if p != path)
    path.unlink()
    path.symlink_to(other)


def _another_runs_file(path: Path, outside: Path) -> None:
    other = next(p for p in path.parent.parent.glob("*/*.h5") if p != path)
    path.unlink()
    shutil.copy(other, path)


def _damaged_structure(signature: bytes) -> Callable[[Path, Path], None]:
    """The file's first HDF5 structure that starts with ``signature`` (a group's B-tree, its
    local heap of names, a symbol table node) overwritten, as a bad sector would: h5py raised
    a RuntimeError there, which every command reported as an internal error."""

    def craft(path: Path, outside: Path) -> None:
        data = bytearray(path.read_bytes())
        at = data.find(signature)
        assert at > 0, f"no {signature!r} in {path}"
        data[at : at + len(signature)] = b"\0" * len(signature)
        path.write_bytes(bytes(data))

    return craft


CACHE_CASES = [
    Case("truncated file", _truncate, "not a readable HDF5 file"),
    Case("zero-length file", _zero, "is empty"),
    Case("bad superblock", _bad_superblock, "not a readable HDF5 file"),
    Case("a folder", _directory, "is a folder"),
    Case("a dangling symbolic link", _dangling, "symbolic link"),
    Case("a FIFO", _fifo, "FIFO"),
    Case("a link to another run", _link_to_another_run, "symbolic link"),
    Case("another run's file", _another_runs_file, "not the run its name says"),
    Case("a flipped byte in a map", flip_a_byte_of("map"), "damaged chunk|map does not match"),
    Case("a flipped byte in a label", flip_a_byte_of("label"), "do not match their checksum"),
    Case("a damaged group B-tree", _damaged_structure(b"TREE"), "member table of / is damaged"),
    Case("a damaged heap of names", _damaged_structure(b"HEAP"), "member table of / is damaged"),
    Case("a damaged symbol table", _damaged_structure(b"SNOD"), "member table of / is damaged"),
]
