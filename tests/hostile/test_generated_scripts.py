"""What segdiff writes for a user to run is inert wherever a name lands in it.
``slurm-script`` writes a model's file name, a masks folder, images, the results folder,
the current folder and #SBATCH values into live lines and into comments; a line break in a
comment ends it, and what follows ran in every array task (``touch PWNED`` did, quoted by
``shlex.quote`` and all). A value with a control character is refused in one line naming it;
every other value reaches the program as the very word it was, through a real shell. The
repair's Keras code and the ``segdiff run`` that reproduces a map are held to the same."""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from segdiff_gui.cli.run_words import run_command
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.repair import repair_code
from segdiff_gui.core.text import printable
from segdiff_gui.resources import demo_dir, demo_model
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here
from tests.hostile.names import HOSTILE_NAMES

# The script's checks may ask an engine child of the model (the fake engine's, here).
pytestmark = pytest.mark.timeout(120, method="thread")

# Names with a character no script can carry safely: each would break a comment's line.
BREAKING = (
    "m\ntouch PWNED\n",
    "m\rtouch PWNED",
    "m\x0btouch PWNED\x0c",
    "m\x1b]0;title\x07",
    "m\n#SBATCH --wrap=touch PWNED",
    "m\u2028touch PWNED",
)
# Names a shell would act on unquoted: they are written, and stay the words they are.
ACTIVE = "m $(touch PWNED) `touch PWNED` 'q' ; && #SBATCH --wrap=x * %A"


def _test_set(folder: Path, name: str, where: str) -> tuple[Path, Path, Path]:
    """The model, an image and its mask's folder, those ``where`` names named ``name``."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / ((name if "model" in where else "model") + ".keras")
    shutil.copy(demo_model(), model)
    first = sorted((demo_dir() / "images").iterdir())[0]
    image = folder / ((name if "image" in where else first.stem) + first.suffix)
    shutil.copy(first, image)
    masks = folder / (name if "masks" in where else "masks")
    masks.mkdir()
    shutil.copy(demo_dir() / "masks" / first.name, masks / image.name)
    return model, image, masks


@pytest.mark.parametrize("where", ["model", "image", "masks", "results", "job name", "folder"])
def test_a_name_that_would_break_a_line_of_the_slurm_script_is_refused_in_one_line(
    where, tmp_path, capsys, monkeypatch, fake_engine
):
    for index, name in enumerate(BREAKING):
        here = tmp_path / str(index) / (name if where == "folder" else "here")
        model, image, masks = _test_set(here, name, where)
        monkeypatch.chdir(here)
        before = sorted(here.iterdir())
        script = here / "job.sh"
        options = {"results": ["--results", name], "job name": ["--job-name", name]}
        said = segdiff_here(
            capsys, "slurm-script", "--shards", "1", "--out", script, *options.get(where, []),
            model, image, "--masks", masks, "--repeats", "1",
        )  # fmt: skip
        assert said.returncode == 2, (name, said.stdout)
        (line,) = said.stderr.splitlines()
        assert line.startswith("segdiff: ") and printable(name) in line, line
        assert "a Slurm script cannot carry safely" in line, line
        assert "#!/bin/bash" not in said.stdout
        assert sorted(here.iterdir()) == before  # no script, no results folder
        assert not list(tmp_path.rglob("PWNED"))


def _stub(folder: Path) -> Path:
    """A program that records the words it was given, one JSON line per call."""
    stub = folder / "stub"
    stub.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "with open(os.environ['STUB_LOG'], 'a') as log:\n"
        "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    stub.chmod(0o755)
    return stub


def _shell(command: list[str], cwd: Path, log: Path) -> list[list[str]]:
    """The words each call of the stub got when ``command`` ran in a real shell."""
    log.unlink(missing_ok=True)
    env = {"PATH": "/usr/bin:/bin", "STUB_LOG": str(log), "TMPDIR": str(cwd),
           "SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "1"}  # fmt: skip
    ran = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_every_other_name_reaches_the_program_as_the_word_it_was(
    tmp_path, capsys, monkeypatch, fake_engine
):
    here = tmp_path / ACTIVE  # the current folder too (an #SBATCH line takes no '"')
    model, image, masks = _test_set(here, f'{ACTIVE} "q"', "model image masks")
    monkeypatch.chdir(here)
    said = segdiff_here(
        capsys, "slurm-script", "--shards", "1", "--out", "job.sh", "--job-name", ACTIVE,
        "--results", "results", model, image, "--masks", masks, "--repeats", "1",
    )  # fmt: skip
    assert said.returncode == 0, said.stderr
    text = (here / "job.sh").read_text()
    lines = text.splitlines()
    assert [line.split("=")[0] for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --array", "#SBATCH --chdir", "#SBATCH --output", "#SBATCH --job-name",
    ]  # fmt: skip
    assert f'#SBATCH --job-name="{ACTIVE}"' in lines  # sbatch's quotes: no expansion there
    # The program the script names, replaced by the stub: everything else as written.
    program = f"{shlex.quote(sys.executable)} -m segdiff_gui.cli"
    assert text.count(program) == 5
    stub, log = _stub(tmp_path), tmp_path / "calls.jsonl"
    (here / "job.sh").write_text(text.replace(program, shlex.quote(str(stub))))
    results = str(here / "results")
    run = [str(model), str(image), "--masks", str(masks), "--repeats", "1"]
    task = _shell(["bash", "job.sh"], here, log)
    assert task == [["run", *run, "--shard", "slurm", "--bundle", results]]
    # The merge and sweep the comments give, as a user pastes them, and as sbatch's --wrap.
    merge = [f"{results}/shard-*-of-1.h5"]
    after = [["merge", *merge], ["sweep", "--model", model.name, "--masks", str(masks)]]
    (hint,) = [line for line in lines if line.startswith(f"#   {program} merge ")]
    pasted = hint.removeprefix("#   ").replace(program, shlex.quote(str(stub)))
    assert _shell(["bash", "-c", pasted], here, log) == after
    (wrap,) = [line for line in lines if line.startswith("#   sbatch --dependency")]
    words = shlex.split(wrap.removeprefix("#").replace(program, shlex.quote(str(stub))))
    assert words[words.index("--wrap") - 1] == f"--chdir={here}"
    assert _shell(["sh", "-c", words[words.index("--wrap") + 1]], here, log) == after
    assert not list(tmp_path.rglob("PWNED"))


def test_the_repairs_keras_code_holds_hostile_layer_names_as_string_literals():
    names = (*HOSTILE_NAMES, "x'''\nimport os; os.system('touch PWNED')\n'''", 'y"\\')
    code = repair_code("m'\nimport os\n.keras", "mixed_bfloat16", names)
    module = ast.parse(code)
    plain_code = repair_code("m.keras", "mixed_bfloat16", ("a",))
    plain = ast.parse(plain_code)
    assert [type(node) for node in module.body] == [type(node) for node in plain.body]
    assert [node for node in module.body if isinstance(node, ast.Import)][0].names[0].name == (
        "keras"
    )
    kept = next(n for n in module.body if isinstance(n, ast.Assign) and
                getattr(n.targets[0], "id", "") == "KEEP_FLOAT32")  # fmt: skip
    assert ast.literal_eval(kept.value) == set(names)
    # One line per name, whatever it holds.
    assert len(code.splitlines()) == len(plain_code.splitlines()) + len(names) - 1


def test_the_run_that_computes_a_map_again_is_the_words_it_names(tmp_path):
    model = Path(f"/m/{ACTIVE}\nrm -rf ~.keras")
    images = (Path("/i/a\rb.png"), Path("/i/`c`.png"))
    request = MatrixRequest(
        model, images, ResultCache(tmp_path / "c"), (RunConfig(batch=2),), target=str(images[0])
    )
    command = run_command(request)
    assert shlex.split(command)[:7] == [
        "segdiff", "run", str(model), *map(str, images), "--target", str(images[0]),
    ]  # fmt: skip
