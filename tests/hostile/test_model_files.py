"""A model is read only within bounds and only after trust: a
SavedModel folder is refused without trust before a byte of it is read, walked without
following links or opening special files when trusted, and a .keras archive's members are
bounded before Keras inflates them."""

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import hash_path
from segdiff_gui.runner.plan import check_model_path


@pytest.fixture
def saved_model(tmp_path) -> Path:
    """A SavedModel folder whose variables hold a FIFO: opening it would wait for a writer
    for ever, as reading /proc/self/pagemap would run for minutes."""
    folder = tmp_path / "model"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")
    os.mkfifo(folder / "variables" / "variables.data-00000-of-00001")
    return folder


@pytest.mark.timeout(60, method="thread")  # reading the link would run for minutes
def test_an_untrusted_saved_model_is_refused_before_it_is_read(
    saved_model, tmp_path, capsys, fake_engine
):
    # What the review planted: a link to a file of /proc that reads for minutes.
    (saved_model / "variables" / "variables.index").symlink_to("/proc/self/pagemap")
    image = tmp_path / "image.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))  # a good image: the model is the problem
    args = ["run", str(saved_model), str(image), "--cache", str(tmp_path / "cache")]
    assert segdiff([*args, "--repeats", "1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is a TensorFlow SavedModel, whose graph can run file and system operations" in line


def test_a_trusted_saved_model_is_walked_as_plain_files_only(saved_model, tmp_path):
    with pytest.raises(InputError, match=r"holds a special file \(variables/variables.data"):
        hash_path(saved_model)  # once skipped: rglob's is_file() is False for it
    (saved_model / "variables" / "variables.data-00000-of-00001").unlink()
    (saved_model / "variables" / "variables.index").symlink_to("/proc/self/pagemap")
    with pytest.raises(InputError, match=r"holds a symbolic link \(variables/variables.index\)"):
        hash_path(saved_model)
    (saved_model / "variables" / "variables.index").unlink()
    (saved_model / "variables" / "variables.index").write_bytes(b"index")
    assert len(hash_path(saved_model)) == 64


def test_a_file_that_never_ends_is_not_hashed_for_ever():
    with pytest.raises(InputError, match="is not a plain file"):
        hash_path("/proc/self/status")  # says 0 bytes, holds more


def test_a_keras_archive_whose_config_inflates_past_the_bound_is_refused(tmp_path):
    model = tmp_path / "bomb.keras"
    with zipfile.ZipFile(model, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata.json", "{}")
        archive.writestr("config.json", b" " * (65 << 20))
    assert model.stat().st_size < 1 << 20
    with pytest.raises(InputError, match="holds a config.json of 65 MB unpacked, over") as caught:
        check_model_path(model)
    assert "bound of 64 MB" in str(caught.value)
    (tmp_path / "not.keras").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(InputError, match="is not a .keras model"):
        check_model_path(tmp_path / "not.keras")
