"""The user's own artefacts read as untrusted data: what would make a runtime read
outside the file or run code, or a declared size the file does not hold, is one line naming
the file, exit 2, before any child starts; what the file points at outside it is never opened
(a FIFO there would block a reader for ever)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import InputError
from segdiff_gui.io.artefacts import read_artefact
from tests.hostile.artefact_files import ir_files, onnx_bytes, tflite_bytes


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _tflite(folder: Path, **options: object) -> Path:
    path = folder / "model.tflite"
    path.write_bytes(tflite_bytes(**options))  # type: ignore[arg-type]
    return path


def _onnx(folder: Path, **options: str) -> Path:
    path = folder / "model.onnx"
    path.write_bytes(onnx_bytes(**options))
    return path


def _ir_without_bin(folder: Path) -> Path:
    path = ir_files(folder)
    (folder / "model.bin").unlink()
    return path


def _ir_bin_link(folder: Path) -> Path:
    path = ir_files(folder)
    (folder / "model.bin").unlink()
    (folder / "model.bin").symlink_to(_fifo(folder / "elsewhere"))
    return path


def _tflite_truncated(folder: Path) -> Path:
    path = folder / "model.tflite"
    path.write_bytes(tflite_bytes()[:200])  # its tables point past the end
    return path


def _onnx_external(folder: Path) -> Path:
    _fifo(folder / "weights.data")  # ONNX Runtime would open it relative to the model
    return _onnx(folder, external="weights.data")


# name: (how the case is made in a folder, what its one line says)
CASES = {
    "onnx with external data": (_onnx_external, "keeps tensor 'bias' as external data"),
    "onnx of a custom op domain": (
        lambda folder: _onnx(folder, domain="com.example.ops"),
        "uses operator domain 'com.example.ops', which needs a custom op library",
    ),
    "tflite with a custom op": (
        lambda folder: _tflite(folder, custom="MyCustomOp"),
        "uses the custom op 'MyCustomOp'",
    ),
    "tflite buffer past its end": (
        lambda folder: _tflite(folder, buffer_at=(10_000, 4096)),
        "buffer 2 is declared at bytes 10,000–14,096, beyond its",
    ),
    "tflite truncated": (_tflite_truncated, "is not a readable LiteRT flatbuffer"),
    "ir without its bin": (_ir_without_bin, "needs its weights model.bin beside it, which is"),
    "ir whose bin is a link": (_ir_bin_link, "has weights model.bin that are a symbolic link"),
    "ir whose bin is larger": (
        lambda folder: ir_files(folder, bin_bytes=4096),
        "declares 4 bytes of weights, but model.bin holds 4,096",
    ),
    "ir whose bin is smaller": (
        lambda folder: ir_files(folder, bin_bytes=2),
        "declares 4 bytes of weights, but model.bin holds 2",
    ),
    "ir with an extension's op": (
        lambda folder: ir_files(folder, op="my_extension"),
        "from 'my_extension', not an OpenVINO operation set: an extension",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_hostile_artefact_is_one_line_before_any_reading_outside_it(name, tmp_path):
    make, said = CASES[name]
    path = make(tmp_path)
    with pytest.raises(InputError, match=None) as raised:
        read_artefact(path)
    line = str(raised.value)
    assert said in line and line.startswith(str(path)) and "\n" not in line, line


@pytest.mark.timeout(60, method="thread")  # a FIFO opened for reading would block for ever
@pytest.mark.parametrize("name", ["onnx with external data", "ir whose bin is a link"])
def test_the_command_line_says_it_exits_2_and_starts_no_child(name, tmp_path, capsys, fake_engine):
    make, said = CASES[name]
    path = make(tmp_path)
    image = tmp_path / "image.npy"
    np.save(image, np.zeros((8, 8, 1), np.float32))
    cache = tmp_path / "cache"
    code = segdiff(["run", str(path), str(image), "--cache", str(cache), "--repeats", "1"])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert said in line and str(path.name) in line, line
    assert not list(cache.glob("runs/*/*.h5"))  # nothing computed


def test_the_good_tiny_artefacts_are_read(tmp_path):
    for path in (_tflite(tmp_path), _onnx(tmp_path), ir_files(tmp_path)):
        facts = read_artefact(path)
        assert facts.input_shape == (8, 8, 1) and facts.fixed_batch is None
        assert [output.shape for output in facts.outputs] == [(None, 8, 8, 1)]
    assert read_artefact(_tflite(tmp_path, batch=1)).fixed_batch == 1
