"""The stored-array reader gives exactly what HDF5's own reading gives, for the layout segdiff
writes, and refuses everything else (and every damaged chunk) naming the file."""

import tracemalloc
import zlib

import h5py
import numpy as np
import pytest

from segdiff_gui.storage import ResultCache, chunked_read
from segdiff_gui.storage.chunked_read import read_stored_array
from segdiff_gui.storage.hdf5_access import UnreadableEntry
from tests.factories import make_record


@pytest.fixture(params=["parallel", "one by one"])
def either_path(request, monkeypatch):
    threshold = 0 if request.param == "parallel" else 2**62
    monkeypatch.setattr(chunked_read, "PARALLEL_FROM_BYTES", threshold)


@pytest.mark.parametrize("shape", [(600, 700), (300, 520, 3), (256, 256)])
def test_a_stored_run_reads_back_bit_for_bit(tmp_path, shape, either_path):
    # Edge chunks (600 is not a multiple of 256), a class axis, and every bit pattern (NaN
    # payloads, -0, infinities, subnormals, negatives) survive.
    bits = np.random.default_rng(3).integers(0, 2**32, size=shape, dtype=np.uint32)
    values = bits.view(np.float32)
    cache = ResultCache(tmp_path)
    kind = "softmax" if len(shape) == 3 else "sigmoid"
    record = make_record("ab", values, kind=kind)
    cache.write_run(record)
    with h5py.File(cache.run_path(record.key)) as handle:
        assert handle["probabilities"].chunks is not None
    read = cache.read_run(record.key).probabilities
    assert read is not None and read.shape == shape
    assert read.view(np.uint32).tobytes() == values.view(np.uint32).tobytes()


@pytest.mark.parametrize("dtype", ["u1", "<u2", "<f4", "<f8"])
def test_images_of_every_width_read_back(tmp_path, dtype, either_path):
    image = (np.arange(300 * 270 * 3) % 251).astype(dtype).reshape(300, 270, 3)
    cache = ResultCache(tmp_path)
    cache.write_image("5e" * 32, "t.png", image)
    back = cache.read_image("5e" * 32)
    assert back.dtype == image.dtype and np.array_equal(back, image)


def _dataset(path, **options):
    handle = h5py.File(path, "w")
    defaults = dict(shape=(512, 300), dtype="<f4", chunks=(256, 256), shuffle=True,
                    compression="gzip")  # fmt: skip
    return handle, handle.create_dataset("map", **{**defaults, **options})


def test_a_chunk_stored_without_deflate_is_read(tmp_path, either_path):
    path = tmp_path / "odd.h5"
    handle, dataset = _dataset(path)
    with handle:
        dataset[...] = 0.5
        # HDF5 skips its (optional) deflate where it would not shrink the chunk: filter mask
        # 0b10, the bytes only shuffled.
        raw = np.full((256, 256), 0.75, dtype="<f4")
        shuffled = raw.view(np.uint8).reshape(-1, 4).T.copy().tobytes()
        dataset.id.write_direct_chunk((256, 0), shuffled, filter_mask=0b10)
    with h5py.File(path) as handle:
        read = read_stored_array(handle["map"], str(path))
        assert np.array_equal(read, handle["map"][()])
    assert read[0, 0] == 0.5 and read[300, 0] == 0.75


def test_a_map_with_chunks_never_written_is_refused(tmp_path):
    # HDF5 would give the fill value for them, silently (a virtual dataset's missing source
    # does the same): a map segdiff wrote has every chunk.
    path = tmp_path / "holes.h5"
    handle, dataset = _dataset(path, fillvalue=0.25)
    with handle:
        dataset[:256, :256] = 0.5
    with h5py.File(path) as handle, pytest.raises(UnreadableEntry, match="1 of its 4 chunks"):
        read_stored_array(handle["map"], str(path))


def test_layouts_segdiff_never_writes_are_refused(tmp_path):
    path = tmp_path / "plain.h5"
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    with h5py.File(path, "w") as handle:
        handle["contiguous"] = values
        handle.create_dataset("lzf", data=values, chunks=(2, 2), compression="lzf")
        handle.create_dataset("big_endian", data=values.astype(">f4"), chunks=(2, 2),
                              compression="gzip", shuffle=True)  # fmt: skip
    expected = {
        "contiguous": "not stored in chunks",
        "lzf": "not stored through shuffle and deflate",
        "big_endian": ">f4 values",
    }
    with h5py.File(path) as handle:
        for name, problem in expected.items():
            with pytest.raises(UnreadableEntry, match=problem):
                read_stored_array(handle[name], str(path))


def test_a_chunk_that_inflates_past_its_size_is_refused_without_inflating_it(tmp_path):
    # The gzip bomb: a few kB that inflate to 64 times the 256×256 chunk they are stored as
    # (a GB in the wild; 16 MB shows the same). Inflated whole, it would be a 16 MB buffer:
    # what the read allocates is traced (numpy's and zlib's buffers both).
    path = tmp_path / "bomb.h5"
    bomb = zlib.compress(b"\0" * (16 << 20), 9)
    handle, dataset = _dataset(path, shape=(256, 256))
    with handle:
        dataset.id.write_direct_chunk((0, 0), bomb, filter_mask=0)
    tracemalloc.start()
    try:
        with h5py.File(path) as handle, pytest.raises(UnreadableEntry, match="does not inflate"):
            read_stored_array(handle["map"], str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # the chunk's 256 kB, a few times over at most


def _write_map(path, seed, padding=False):
    with h5py.File(path, "w") as handle:
        if padding:
            handle.attrs["pad"] = np.zeros(5000)  # moves every chunk to another address
        handle.create_dataset(
            "map", data=np.random.default_rng(seed).random((600, 600), dtype=np.float32),
            chunks=(256, 256), compression="gzip", compression_opts=4, shuffle=True,
        )  # fmt: skip


def test_a_file_replaced_while_open_is_read_as_hdf5_opened_it(tmp_path, either_path):
    # Writes are atomic renames: another process may finish the same key while we read.
    _write_map(tmp_path / "run.h5", 1)
    _write_map(tmp_path / "new.h5", 2, padding=True)
    with h5py.File(tmp_path / "run.h5", "r", locking=False) as handle:
        (tmp_path / "new.h5").replace(tmp_path / "run.h5")
        assert np.array_equal(read_stored_array(handle["map"], "run.h5"), handle["map"][()])


def test_a_damaged_chunk_names_the_file(tmp_path, either_path):
    path = tmp_path / "run.h5"
    _write_map(path, 3)
    with h5py.File(path, "r") as handle:
        chunks = chunked_read._locate_chunks(handle["map"], str(path))
    damaged = chunks[1]
    with open(path, "r+b") as raw:
        raw.seek(damaged.address + damaged.size // 2)
        raw.write(b"\xff" * 64)
    with (
        h5py.File(path, "r") as handle,
        pytest.raises(UnreadableEntry, match=rf"{path}: /map has a damaged chunk"),
    ):
        read_stored_array(handle["map"], str(path))


def test_maps_written_on_one_thread_while_another_uses_hdf5_never_meet_inside_it():
    """h5py's ``write_direct_chunk`` and ``read_direct_chunk`` do not take h5py's lock: a
    sweep's thread keeping images while the runner reads attributes failed with "Unspecified
    error in H5Dwrite_chunk". Both go through storage/hdf5_access's locked calls now."""
    import threading
    import uuid

    import h5py

    from segdiff_gui.storage.chunked_write import write_compressed

    errors: list[str] = []
    done = threading.Event()

    def writing() -> None:
        try:
            for _ in range(1500):
                name = f"w{uuid.uuid4().hex}"
                with h5py.File(name, "w", driver="core", backing_store=False) as handle:
                    data = np.random.default_rng(0).random((64, 64), dtype=np.float32)
                    written = write_compressed(handle, "image", data, "<f4")
                    assert np.array_equal(written[...], data)
        except Exception as error:  # noqa: BLE001 - what the other thread meets is the point
            errors.append(repr(error))
        finally:
            done.set()

    def attributes() -> None:
        try:
            while not done.is_set():
                name = f"o{uuid.uuid4().hex}"
                with h5py.File(name, "w", driver="core", backing_store=False) as handle:
                    dataset = handle.create_dataset("a", data=np.arange(100))
                    for number in range(20):
                        dataset.attrs[f"k{number}"] = number
                    assert len(dict(dataset.attrs)) == 20
        except Exception as error:  # noqa: BLE001
            errors.append(repr(error))
            done.set()

    threads = [threading.Thread(target=writing), threading.Thread(target=attributes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
