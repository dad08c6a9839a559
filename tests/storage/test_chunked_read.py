"""The parallel map reader gives exactly what HDF5's own reading gives."""

import h5py
import numpy as np
import pytest

from segdiff_gui.storage import ResultCache, chunked_read
from segdiff_gui.storage.chunked_read import read_map
from tests.storage.test_cache import make_record


@pytest.fixture(autouse=True)
def every_map_in_parallel(monkeypatch):
    monkeypatch.setattr(chunked_read, "PARALLEL_FROM_BYTES", 0)


@pytest.mark.parametrize("shape", [(600, 700), (300, 520, 3), (256, 256)])
def test_a_stored_run_reads_back_bit_for_bit(tmp_path, shape):
    # Edge chunks (600 is not a multiple of 256), a class axis, and every bit pattern (NaN
    # payloads, -0, infinities, subnormals, negatives) survive.
    bits = np.random.default_rng(3).integers(0, 2**32, size=shape, dtype=np.uint32)
    values = bits.view(np.float32)
    cache = ResultCache(tmp_path)
    cache.write_run(make_record("ab" * 32, values))
    with h5py.File(cache.run_path("ab" * 32)) as handle:
        assert handle["probabilities"].chunks is not None
    read = cache.read_run("ab" * 32).probabilities
    assert read is not None and read.shape == shape
    assert read.view(np.uint32).tobytes() == values.view(np.uint32).tobytes()


def test_chunks_hdf5_must_read_itself_are_read_by_hdf5(tmp_path):
    path = tmp_path / "odd.h5"
    with h5py.File(path, "w") as handle:
        dataset = handle.create_dataset(
            "map", shape=(512, 300), dtype="<f4", chunks=(256, 256), shuffle=True,
            compression="gzip", fillvalue=0.25,
        )  # fmt: skip
        dataset[:256, :256] = 0.5  # an ordinary chunk
        # A chunk stored with both filters skipped (filter mask 0b11): raw little-endian bytes.
        raw = np.full((256, 256), 0.75, dtype="<f4")
        dataset.id.write_direct_chunk((256, 0), raw.tobytes(), filter_mask=0b11)
        # Chunks (0, 256) and (256, 256) are never written: the fill value.
    with h5py.File(path) as handle:
        read = read_map(handle["map"])
        assert np.array_equal(read, handle["map"][()])
    assert read[0, 0] == 0.5 and read[300, 0] == 0.75 and read[0, 299] == 0.25


def test_other_layouts_are_read_by_hdf5(tmp_path):
    path = tmp_path / "plain.h5"
    values = np.arange(12, dtype=np.float64).reshape(3, 4)
    with h5py.File(path, "w") as handle:
        handle["contiguous"] = values.astype(np.float32)
        handle.create_dataset("lzf", data=values.astype(np.float32), chunks=(2, 2),
                              compression="lzf")  # fmt: skip
        handle["doubles"] = values
    with h5py.File(path) as handle:
        for name in ("contiguous", "lzf", "doubles"):
            assert np.array_equal(read_map(handle[name]), values)


def _write_map(path, seed, padding=False):
    with h5py.File(path, "w") as handle:
        if padding:
            handle.attrs["pad"] = np.zeros(5000)  # moves every chunk to another address
        handle.create_dataset(
            "map", data=np.random.default_rng(seed).random((600, 600), dtype=np.float32),
            chunks=(256, 256), compression="gzip", compression_opts=4, shuffle=True,
        )  # fmt: skip


def test_a_file_replaced_while_open_is_read_as_hdf5_opened_it(tmp_path):
    # Writes are atomic renames: another process may finish the same key while we read.
    _write_map(tmp_path / "run.h5", 1)
    _write_map(tmp_path / "new.h5", 2, padding=True)
    with h5py.File(tmp_path / "run.h5", "r", locking=False) as handle:
        (tmp_path / "new.h5").replace(tmp_path / "run.h5")
        assert np.array_equal(read_map(handle["map"]), handle["map"][()])


def test_a_damaged_chunk_is_an_os_error_as_with_hdf5(tmp_path):
    path = tmp_path / "run.h5"
    _write_map(path, 3)
    with h5py.File(path, "r") as handle:
        chunks, _ = chunked_read._locate_chunks(handle["map"])
    damaged = chunks[1]
    with open(path, "r+b") as raw:
        raw.seek(damaged.address + damaged.size // 2)
        raw.write(b"\xff" * 64)
    with h5py.File(path, "r") as handle:
        with pytest.raises(OSError):
            handle["map"][()]
        with pytest.raises(OSError, match="damaged"):
            read_map(handle["map"])
