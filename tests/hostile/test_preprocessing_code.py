"""What a run's key holds of the user's preprocessing code. A trusted
``--preprocess`` file that imports a helper module of its folder was keyed by its own bytes
only: the helper changed, the old maps were served. The key now holds every module of the
file's folder that its import statements name (a package's every module), the child loads
them from that folder wherever segdiff was started, refuses one it loaded by a computed name,
and never blocks on a special file named as a module."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.engine.user_code import UserPreprocessing
from segdiff_gui.runner.arguments import preprocessing_function
from tests.conftest import segdiff_here

pytestmark = pytest.mark.timeout(60, method="thread")


def _code(folder: Path, helper: str) -> Path:
    """``prep.py`` importing ``HELPER.py`` and the package ``HELPER_norms`` of its folder."""
    folder.mkdir(parents=True)
    (folder / "prep.py").write_text(
        f"import numpy as np\nimport {helper}\n\n\ndef prepare(image):\n"
        f"    from {helper}_norms.z import centre  # a function's own import counts too\n"
        f"    return centre({helper}.scale(image.astype(np.float32)))\n"
    )
    (folder / f"{helper}.py").write_text("def scale(x):\n    return x / 255.0\n")
    (folder / f"{helper}_norms").mkdir()
    (folder / f"{helper}_norms" / "__init__.py").write_text("")
    (folder / f"{helper}_norms" / "z.py").write_text("def centre(x):\n    return x - 0.5\n")
    return folder / "prep.py"


@pytest.fixture
def forget_modules():
    """The helper modules a test loads in this process are forgotten after it."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_changed_helper_module_is_a_new_key_and_its_maps_are_computed_again(
    demo, tmp_path, capsys, fake_engine
):
    model, images = demo
    prep = _code(tmp_path / "code", "helper")
    args = ("run", model, images[0], "--config", "batch=1", "--repeats", "1",
            "--cache", tmp_path / "cache", "--preprocess", f"{prep}:prepare",
            "--trust-preprocess", "--json")  # fmt: skip

    def run() -> dict[str, str]:
        said = segdiff_here(capsys, *args)
        assert said.returncode == 0, said.stderr
        (only,) = json.loads(said.stdout)["runs"]
        return only

    first = run()
    cached = run()
    assert (first["status"], cached["status"], cached["key"]) == (
        "finished",
        "cached",
        first["key"],
    )
    keys = {first["key"]}
    for edited in (prep.parent / "helper.py", prep.parent / "helper_norms" / "z.py"):
        edited.write_text(edited.read_text() + "# another version\n")
        again = run()
        assert again["status"] == "finished" and again["key"] not in keys, edited
        keys.add(again["key"])
    (prep.parent / "unrelated.py").write_text("x = 1\n")  # not imported: not keyed
    assert [run()[field] for field in ("status", "key")] == ["cached", again["key"]]


def test_the_child_loads_the_helpers_of_the_files_folder_and_only_those_the_key_holds(
    tmp_path, monkeypatch, forget_modules
):
    prep = _code(tmp_path / "code", "helper_b")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "helper_b.py").write_text("def scale(x):\n    raise SystemExit('wrong one')\n")
    monkeypatch.chdir(elsewhere)  # a helper of the working folder is never the one loaded
    planned = preprocessing_function(f"{prep}:prepare")
    function = UserPreprocessing(planned, trusted=True)
    image = np.full((4, 4, 1), 51, np.uint8)
    made = function(image, 4, 4, 1, "image.png")
    assert made.tobytes() == (np.float32(51) / np.float32(255) - np.float32(0.5)).tobytes() * 16
    # A helper changed after the runs were planned: their key no longer says what would run.
    (prep.parent / "helper_b_norms" / "z.py").write_text("def centre(x):\n    return x\n")
    with pytest.raises(InputError, match="prep.py: changed since the runs were planned"):
        UserPreprocessing(planned, trusted=True)
    # A module of the folder loaded by a computed name: code the key could not hold.
    dynamic = tmp_path / "dynamic"
    dynamic.mkdir()
    (dynamic / "prep.py").write_text(
        "import importlib\n\n\ndef prepare(image):\n"
        "    return importlib.import_module('hid' + 'den_c').scale(image)\n"
    )
    (dynamic / "hidden_c.py").write_text("def scale(x):\n    return x / 255.0\n")
    function = UserPreprocessing(preprocessing_function(f"{dynamic / 'prep.py'}:prepare"), True)
    with pytest.raises(InputError) as refused:
        function(image, 4, 4, 1, "image.png")
    assert str(refused.value) == (
        f"{dynamic / 'prep.py'}: loaded hidden_c.py from its folder by a name no import "
        "statement of it gives, so its runs' key would not hold that code; import it with a "
        "plain import statement"
    )


def test_a_special_file_named_as_a_helper_is_refused_without_reading_it(tmp_path):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "prep.py").write_text("import pipe_d\n\n\ndef prepare(image):\n    return image\n")
    os.mkfifo(folder / "pipe_d.py")  # reading it would wait for a writer for ever
    with pytest.raises(InputError, match=r"pipe_d.py: is not a plain file of code under 16 MB"):
        preprocessing_function(f"{folder / 'prep.py'}:prepare")
