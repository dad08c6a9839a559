"""Ground-truth masks are found by file name and checked against the maps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.core.errors import InputError
from segdiff_gui.io.truth import TruthFolder


def _save(path: Path, array: np.ndarray) -> None:
    Image.fromarray(array.astype(np.uint8)).save(path)


def test_masks_are_matched_by_stem_with_optional_suffix(tmp_path: Path) -> None:
    _save(tmp_path / "a.png", np.array([[0, 255], [255, 0]]))
    _save(tmp_path / "b_mask.png", np.array([[1, 1], [0, 0]]))
    truth = TruthFolder(tmp_path)
    assert truth.read("a.tif", (2, 2), 2).tolist() == [[0, 1], [1, 0]]
    assert truth.read("b.png", (2, 2), 2).tolist() == [[1, 1], [0, 0]]
    assert truth.read("c.png", (2, 2), 2) is None


def test_bad_masks_are_one_line_errors_naming_the_file(tmp_path: Path) -> None:
    _save(tmp_path / "a.png", np.array([[0, 3], [1, 2]]))
    truth = TruthFolder(tmp_path)
    with pytest.raises(InputError, match=r"a\.png: holds labels 0…3 but the model has 3 classes"):
        truth.read("a.png", (2, 2), 3)
    with pytest.raises(InputError, match=r"a\.png: is 2×2 but the maps are 4×4"):
        truth.read("a.png", (4, 4), 2)
    Image.fromarray(
        np.dstack([np.zeros((2, 2)), np.ones((2, 2)), np.zeros((2, 2))]).astype(np.uint8)
    ).save(tmp_path / "rgb.png")
    with pytest.raises(InputError, match="colour image"):
        TruthFolder(tmp_path).read("rgb.png", (2, 2), 2)
    with pytest.raises(InputError, match="no such folder"):
        TruthFolder(tmp_path / "missing")
    (tmp_path / "text.png").write_text("not a mask")
    with pytest.raises(InputError, match=r"text\.png: not a readable image"):
        TruthFolder(tmp_path).read("text.png", (2, 2), 2)
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(InputError, match=r"folder\.png: no such image file"):
        TruthFolder(tmp_path).read("folder.png", (2, 2), 2)


def test_palette_pngs_keep_their_class_indices(tmp_path: Path) -> None:
    labels = np.array([[0, 1], [2, 1]], dtype=np.uint8)
    image = Image.fromarray(labels, mode="P")
    image.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (256 * 3 - 9))
    image.save(tmp_path / "a.png")
    assert TruthFolder(tmp_path).read("a.png", (2, 2), 3).tolist() == labels.tolist()
