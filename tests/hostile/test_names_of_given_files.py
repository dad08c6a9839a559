"""Names of the files a user gives, not of stored runs, reach the terminal as text:
``segdiff run``'s table and summary named the image and the model as given, and
``merge`` its bundle, so a newline in a name forged the next line of output (``compare``
already showed stored names with U+FFFD). Every command below prints them through the one
plain-text function (``core/text.printable``): no line starts with what a name carries after
its newline, and no control character reaches the terminal. The API's text and warnings of
the same runs are held to the same."""

from __future__ import annotations

import shutil
import warnings

import pytest

from segdiff_gui import api
from segdiff_gui.core.text import printable
from tests.conftest import segdiff_here
from tests.hostile.names import FORGED_LINE, RIGHT_TO_LEFT, SCREEN_CLEAR, TERMINAL_CONTROLS

pytestmark = pytest.mark.timeout(120, method="thread")

# What a file's name can hold of the corpus (no "/", within 255 bytes), and a carriage return.
NAME = f"{FORGED_LINE}\r{SCREEN_CLEAR}{RIGHT_TO_LEFT}"


def _forged(text: str) -> list[str]:
    """The lines of ``text`` a name made: they start with what followed its newline."""
    return [line for line in text.splitlines() if line.strip(" │┃").startswith("FAIL forged")]


def _assert_text(said, command: str) -> None:
    text = said.stdout + said.stderr
    assert not _forged(text), (command, _forged(text))
    assert not any(control in text for control in TERMINAL_CONTROLS), command
    assert "\r" not in text, command


def test_names_of_given_files_never_forge_a_line_of_any_commands_output(
    demo, tmp_path, capsys, fake_engine
):
    model, images = demo
    folder = tmp_path / f"in{NAME}"
    folder.mkdir()
    named_model = folder / f"m{NAME}{model.suffix}"
    shutil.copy(model, named_model)
    named = []
    for index, image in enumerate(images[:3]):
        named.append(folder / f"i{index}{NAME}{image.suffix}")
        shutil.copy(image, named[-1])
    cache, home = tmp_path / "cache", tmp_path / f"home{NAME}"
    bundle = tmp_path / f"b{NAME}.h5"
    stored = printable(named[0].name)  # as stored runs name it
    configs = ("--config", "batch=1", "--config", "batch=2", "--repeats", "1")
    for command in (
        ("run", named_model, *named, *configs, "--cache", cache),
        ("run", named_model, *named, *configs, "--sweep", "--cache", cache, "--bundle", bundle),
        ("merge", bundle, "--cache", home),
        ("bundle", tmp_path / f"again{NAME}.h5", "--cache", home),
        ("ls", "--cache", home),
        ("compare", "--cache", home),
        ("check", "--cache", home),
        ("diagnose", "--cache", home),
        ("sweep", "--cache", home),
        ("export", "--csv", tmp_path / f"pixels{NAME}.csv", "--ref", "cpu b1 r0", "--other",
         "cpu b2 r0", "--image", stored, "--cache", home),
        ("report", "--html", tmp_path / f"report{NAME}.html", "--image", stored,
         "--cache", home),
    ):  # fmt: skip
        said = segdiff_here(capsys, *command)
        assert said.returncode in (0, 1), (command[0], said.stderr)
        _assert_text(said, command[0])
    # What the first run said names the model and the image as text, each on one line.
    first = segdiff_here(capsys, "run", named_model, *named, *configs, "--cache", cache)
    summary = [line for line in first.stdout.splitlines() if " from the cache" in line]
    assert len(summary) == 1 and f"m{NAME}".replace("\n", "\ufffd")[:10] in summary[0]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = api.open_bundle(bundle)
        shown = [repr(runs), repr(runs[0]), repr(runs[0].compare()), repr(runs[0].diagnose())]
        with pytest.raises(api.InputError) as several:
            runs.study()  # it names the bundle, and its groups by their images
        shown.append(str(several.value))
    shown += [str(warning.message) for warning in caught]
    for text in shown:
        assert not _forged(text) and "\r" not in text, text
        assert not any(control in text for control in TERMINAL_CONTROLS), text


def test_a_damaged_bundle_named_with_a_newline_is_one_line(tmp_path, capsys):
    bundle = tmp_path / f"b{NAME}.h5"
    bundle.write_bytes(b"not a bundle at all")
    said = segdiff_here(capsys, "merge", bundle, "--cache", tmp_path / "cache")
    assert said.returncode == 2
    (line,) = said.stderr.splitlines()
    assert line.startswith("segdiff: ") and not _forged(said.stderr)
