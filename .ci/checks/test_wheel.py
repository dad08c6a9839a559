"""The wheel carries its demo and icons: built, installed into a fresh virtual environment
outside the repository, ``segdiff demo`` and ``segdiff-gui --smoke-test`` work from a
temporary folder.

The wheel goes in without its dependencies, which the fresh environment reaches through a
``.pth`` line naming this environment's packages (a path only: the editable segdiff there is
never loaded, as the test checks): pip resolving TensorFlow again proves nothing CI's own
install does not, and cost half this test's time. What the wheel asks of pip is checked in
its metadata instead.

Run by ``.ci/run`` after README's test command, outside it (a build and a TensorFlow child:
20-odd seconds that a newcomer's test run need not wait for)."""

import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import segdiff_gui

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def run(*command, cwd, timeout=900):
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )
    assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}{result.stderr[-3000:]}"
    return result


def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path):
    dist = tmp_path / "dist"
    # pyproject's build-system (setuptools) is in this environment: no isolated one to make
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, REPO,
        cwd=tmp_path)  # fmt: skip
    (wheel,) = dist.glob("segdiff-*.whl")
    assert wheel.name.startswith(f"segdiff-{segdiff_gui.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    metadata = (
        zipfile.ZipFile(wheel)
        .read(f"segdiff-{segdiff_gui.__version__}.dist-info/METADATA")
        .decode()
    )
    required = {line.split(": ", 1)[1] for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line}  # fmt: skip
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert {Requirement(r) for r in required} == {Requirement(r) for r in project["dependencies"]}
    for carried in (
        "segdiff_gui/resources/demo/unet_sigmoid.keras",
        "segdiff_gui/resources/demo/images/cell_00.png",
        "segdiff_gui/resources/demo/masks/cell_15.png",
        "segdiff_gui/resources/icons/segdiff.svg",
        "segdiff_gui/resources/icons/segdiff-256.png",
    ):
        assert carried in names

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q",
        "--no-deps", wheel, cwd=tmp_path)  # fmt: skip
    where_packages = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    fresh = run(venv / "bin" / "python", "-c", where_packages, cwd=tmp_path)
    (Path(fresh.stdout.strip()) / "dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    where = run(venv / "bin" / "python", "-c", "import segdiff_gui; print(segdiff_gui.__file__)",
                cwd=tmp_path)  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(venv)  # the wheel's copy, not the repo's

    demo = run(venv / "bin" / "segdiff", "demo", "--repeats", "1", "--cache", tmp_path / "cache",
               cwd=tmp_path)  # fmt: skip
    assert "cpu b1 bf16 r0" in demo.stdout and "0 failed" in demo.stdout
    smoke = run(venv / "bin" / "segdiff-gui", "--smoke-test", cwd=tmp_path)
    assert "smoke test passed" in smoke.stdout
    version = run(venv / "bin" / "segdiff-gui", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"segdiff-gui {segdiff_gui.__version__}"
