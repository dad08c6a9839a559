"""What a user states of an imported map, and what the cache remembers of a model, are bounded
and checked where they are written and read.

Long statements: 30 notes of 8,000 non-ASCII characters each, or an API label of 1.5 million
characters, were written into a run whose provenance the reader then refused: every later
``ls`` and ``compare`` exited 2. What is written is bounded by the reader's own bound, measured
on the text as stored (JSON escapes each such character as six), and the import is refused at
the front door in one line, before anything is stored.

A remembered model answer (``models/<key>.json``) edited to another shape made
``import`` store a map of the wrong size for the model. What is remembered is a hint, checked
against the file it answers for and its own checksum; a map that disagrees with it asks the
model again before it is refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import segdiff_gui
from segdiff_gui.cli.main import main as segdiff
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json
from segdiff_gui.core.limits import MAX_TEXT_BYTES
from segdiff_gui.core.protocol import ModelAnswer
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.devices import sealed_answer
from segdiff_gui.storage import ResultCache
from tests.factories import make_record
from tests.hostile.expect import files_under

pytestmark = pytest.mark.timeout(120, method="thread")


def _said(capsys, *args: object) -> tuple[int, str, str]:
    code = segdiff([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def imported(tmp_path, capsys, fake_engine) -> tuple[Path, Path, Path]:
    """A cache holding one imported map of the demo's first image (256²); that map's file."""
    cache, image = tmp_path / "cache", demo_images()[0]
    map_file = tmp_path / "mine.npy"
    np.save(map_file, np.full((256, 256), 0.25, np.float32))
    code, _, err = _said(capsys, "import", map_file, "--model", demo_model(), "--image", image,
                         "--cache", cache)  # fmt: skip
    assert code == 0, err
    return cache, map_file, image


def test_notes_past_the_readers_bound_are_refused_before_anything_is_stored(
    imported, tmp_path, capsys
):
    cache, _, image = imported
    other = tmp_path / "other.npy"
    np.save(other, np.full((256, 256), 0.75, np.float32))
    before = files_under(cache)
    notes = [f"--note=n{index}={'é' * 8000}" for index in range(30)]  # 16 KB each, 48 KB stored
    code, out, err = _said(capsys, "import", other, "--model", demo_model(), "--image", image,
                           "--cache", cache, *notes)  # fmt: skip
    assert code == 2, out
    (line,) = err.splitlines()
    assert line.startswith(f"segdiff: {other}: ")
    assert f"over segdiff's bound of {MAX_TEXT_BYTES:,}" in line and len(line) < 400, line
    assert files_under(cache) == before  # nothing stored
    for command in ("ls", "compare"):
        assert _said(capsys, command, "--cache", cache)[0] == 0, command


def test_a_label_past_the_readers_bound_is_refused_by_the_api(imported, tmp_path, capsys):
    cache, map_file, image = imported
    other = tmp_path / "other.npy"
    np.save(other, np.full((256, 256), 0.75, np.float32))
    before = files_under(cache)
    with pytest.raises(InputError) as refused:
        segdiff_gui.import_maps(other, demo_model(), image, label="x" * 1_500_000, cache=cache)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{other}: ") and len(line) < 400, line[:400]
    assert f"over segdiff's bound of {MAX_TEXT_BYTES:,}" in line
    assert files_under(cache) == before
    for command in ("ls", "compare"):
        assert _said(capsys, command, "--cache", cache)[0] == 0, command
    # Within the bound, as stated, it is stored and read back whole.
    long = "ü" * 100_000  # 600 KB as stored
    segdiff_gui.import_maps(other, demo_model(), image, label=long, cache=cache)
    assert _said(capsys, "ls", "--cache", cache)[0] == 0


def _remembered(cache: Path) -> Path:
    """The remembered answer of the demo model (the import above asked for it)."""
    (path,) = (cache / "models").glob("*.json")
    return path


def test_a_remembered_answer_edited_to_another_shape_is_asked_again(imported, tmp_path, capsys):
    cache, _, image = imported
    remembered = _remembered(cache)
    text = remembered.read_text()
    assert '"shape": [null, null, null, 1]' in text, text
    # Edited: the model would give three classes at 64×64. A map of that shape must not be
    # stored as this model's (the fake engine's model gives one channel at the image's size).
    remembered.write_text(
        text.replace('"shape": [null, null, null, 1]', '"shape": [null, 64, 64, 3]')
    )
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.full((64, 64, 3), 1 / 3, np.float32))
    before = {p: b for p, b in files_under(cache).items() if not p.startswith("models/")}
    code, out, err = _said(capsys, "import", wrong, "--model", demo_model(), "--image", image,
                           "--cache", cache)  # fmt: skip
    assert code == 2, out
    (line,) = err.splitlines()
    assert line.startswith(f"segdiff: {wrong}: has shape 64×64×3; the model's map is 256×256")
    after = {p: b for p, b in files_under(cache).items() if not p.startswith("models/")}
    assert after == before  # nothing stored
    # What the model said again replaced what was remembered.
    again = json.loads(remembered.read_text())
    assert again["answer"]["outputs"][0]["shape"] == [None, None, None, 1]


def test_a_remembered_answer_a_map_disagrees_with_is_asked_again(imported, tmp_path, capsys):
    """An answer whose checksum was made again with the edit: the map the user gives, which
    the model does give, is not refused on its word."""
    cache, _, image = imported
    remembered = _remembered(cache)
    data = json.loads(remembered.read_text())
    answer = {name: value for name, value in data["answer"].items() if name != "event"}
    answer["outputs"][0]["shape"] = [None, 64, 64, 3]
    remembered.write_text(json.dumps(sealed_answer(data["key"], ModelAnswer(**answer))))
    right = tmp_path / "right.npy"
    np.save(right, np.full((256, 256), 0.5, np.float32))
    code, out, err = _said(capsys, "import", right, "--model", demo_model(), "--image", image,
                           "--cache", cache)  # fmt: skip
    assert code == 0, err
    assert "imported: " in out and "256×256 sigmoid" in out
    assert ResultCache(cache).scan().damaged == []


def test_the_writer_refuses_what_its_reader_would(tmp_path):
    """Where any run is written, each attribute is measured as it is stored (JSON escaped),
    by the reader's own measure: one past the bound is refused, naming the file, and nothing
    is written; one at the bound is read back whole."""
    record = make_record("m", np.full((4, 4), 0.5, np.float32))
    # ["é…é"] is stored as 4 + 6 characters an "é": the most that fits, and one more.
    most = (MAX_TEXT_BYTES - 4) // 6
    for count, refused in ((most, False), (most + 1, True)):
        notes = ["é" * count]
        text = canonical_json(notes)
        assert (len(text) > MAX_TEXT_BYTES) is refused, len(text)
        cache = ResultCache(tmp_path / f"cache-{count}")
        noted = replace(record, provenance=record.provenance.updated({"notes": notes}))
        if refused:
            with pytest.raises(InputError) as said:
                cache.write_run(noted)
            assert str(said.value) == (
                f"{cache.run_path(noted.key)}: its provenance attribute 'notes' would be "
                f"stored as {len(text):,} characters, over segdiff's bound of "
                f"{MAX_TEXT_BYTES:,} for one attribute"
            )
            assert not cache.has(noted.key)
        else:
            cache.write_run(noted)
            assert cache.read_run(noted.key).provenance.to_dict()["notes"] == notes
