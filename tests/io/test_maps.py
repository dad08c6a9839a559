"""The user's own maps read as untrusted data, and the target's map found among a file's."""

import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.maps import open_maps, target_map

NAMES = ["a.png", "b.png", "c.png"]


def test_the_targets_map_is_found_in_every_shape_a_pipeline_saves(tmp_path):
    batch = np.random.default_rng(0).random((3, 4, 5, 1), dtype=np.float32)
    np.save(tmp_path / "batch.npy", batch)
    (found,) = [target_map("x", open_maps(tmp_path / "batch.npy"), NAMES, 2)]
    assert found.shape == (4, 5) and found.tobytes() == batch[2, ..., 0].tobytes()
    np.save(tmp_path / "three.npy", batch[..., 0])  # N×H×W, N = the images
    assert target_map("x", open_maps(tmp_path / "three.npy"), NAMES, 1).tobytes() == (
        batch[1, ..., 0].tobytes()
    )
    np.save(tmp_path / "one.npy", batch[0])  # H×W×1
    assert target_map("x", open_maps(tmp_path / "one.npy"), NAMES, 0).shape == (4, 5)
    np.savez(tmp_path / "named.npz", b=batch[1, ..., 0], c=batch[2, ..., 0])
    assert target_map("x", open_maps(tmp_path / "named.npz"), NAMES, 2).tobytes() == (
        batch[2, ..., 0].tobytes()
    )
    softmax = np.full((4, 5, 3), 1 / 3, dtype=np.float32)
    np.save(tmp_path / "softmax.npy", softmax)
    assert target_map("x", open_maps(tmp_path / "softmax.npy"), NAMES, 0).shape == (4, 5, 3)
    np.save(tmp_path / "two.npy", batch[:2])
    with pytest.raises(InputError, match="a batch of 2 maps for 3 images"):
        target_map("two.npy", open_maps(tmp_path / "two.npy"), NAMES, 0)


def test_bad_maps_are_refused_in_one_line_naming_the_file(tmp_path):
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"objects\.npy: holds Python objects"):
        open_maps(tmp_path / "objects.npy")
    np.save(tmp_path / "ints.npy", np.zeros((4, 4), np.uint8))
    with pytest.raises(InputError, match="is uint8; a probability map is float32"):
        open_maps(tmp_path / "ints.npy")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"junk\.npz: is not a \.npz archive"):
        open_maps(tmp_path / "junk.npz")
    wide = read_maps_of(tmp_path, np.full((2, 2), 0.5, np.float64))
    assert wide.rounded and wide.values.dtype == np.float32


def read_maps_of(folder, values):
    np.save(folder / "map.npy", values)
    return open_maps(folder / "map.npy").read(0)
