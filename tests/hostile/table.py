"""Print what each hostile-input case does to segdiff, as a Markdown table (for issue notes):
``python -m tests.hostile.table [--source DIR]`` runs the commands of another checkout (e.g. a
``git worktree`` of an older commit) against the same crafted files.

Each command runs in a child with its exit code, wall time and peak memory measured; one past
the time bound is killed and reported as a hang.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.hostile.corpus import (
    BUNDLE_CASES,
    CACHE_CASES,
    WHOLE_BUNDLE_CASES,
    base_bundle,
    base_cache,
)
from tests.hostile.inputs import INPUT_CASES

TIME_BOUND_S = 30
# Runs the module as ``python -m`` would, and reports its peak resident memory when it exits.
# VmHWM, not getrusage: ru_maxrss survives fork and exec, so it would start at this script's.
_MEASURED = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write(f'@@peak {line.split()[1]}\\n')\n"
    "atexit.register(peak)\n"
    "module = sys.argv.pop(1)\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def _run(source: Path, home: Path, gui: bool, *args: object) -> str:
    module = "segdiff_gui.ui" if gui else "segdiff_gui.cli"
    env = {
        **os.environ,
        "PYTHONPATH": str(source),
        "QT_QPA_PLATFORM": "offscreen",
        "XDG_CONFIG_HOME": str(home / "config"),
        "SEGDIFF_CACHE": str(home / "default-cache"),
    }
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", _MEASURED, module, *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=source,
    )
    try:
        _, stderr = process.communicate(timeout=TIME_BOUND_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return f"hang (killed after {TIME_BOUND_S} s)"
    seconds = time.perf_counter() - started
    peak = next((line for line in stderr.splitlines() if line.startswith("@@peak ")), "")
    lines = [
        line
        for line in stderr.strip().splitlines()
        if line.strip() and not line.startswith("@@") and "propagateSizeHints" not in line
    ]  # Qt's offscreen platform says that of every window
    said = "traceback" if "Traceback" in stderr else (lines[-1][:70] if lines else "")
    code = process.returncode
    code_text = f"signal {-code}" if code < 0 else str(code)
    memory = f"{int(peak.split()[1]) / 1024:,.0f} MB" if peak else "?"
    return f"{code_text} · {seconds:.1f} s · {memory} · {said.replace('|', '/')}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, default=Path(__file__).parents[2])
    parser.add_argument(
        "--only",
        choices=("bundle", "cache", "input"),
        nargs="+",
        default=("bundle", "cache", "input"),
        help="which kinds of case to run",
    )
    args = parser.parse_args()
    source = args.source.resolve()
    print("| case | command | exit · time · peak memory · last line on stderr |")
    print("|---|---|---|")
    for case in BUNDLE_CASES + WHOLE_BUNDLE_CASES if "bundle" in args.only else []:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder)
            bundle, outside = home / "crafted.h5", home / "outside"
            outside.mkdir()
            base_bundle(bundle, home)
            case.craft(bundle, outside)
            for name, gui, command in (
                ("merge", False, ("merge", bundle, "--cache", home / "laptop")),
                ("compare --bundle", False, ("compare", "--bundle", bundle)),
                ("gui --open", True, ("--open", bundle, "--quit-when-painted")),
            ):
                print(f"| bundle: {case.name} | {name} | {_run(source, home, gui, *command)} |")
                sys.stdout.flush()
    for case in CACHE_CASES if "cache" in args.only else []:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder)
            cache, keys = base_cache(home / "cache")
            outside = home / "outside"
            outside.mkdir()
            case.craft(cache.run_path(keys[2]), outside)
            for name, command in (
                ("ls", ("ls", "--cache", cache.root)),
                ("check", ("check", "--cache", cache.root)),
                ("bundle", ("bundle", home / "out.h5", "--cache", cache.root)),
            ):
                print(f"| cache: {case.name} | {name} | {_run(source, home, False, *command)} |")
                sys.stdout.flush()
            shutil.rmtree(home / "cache", ignore_errors=True)
    for case in INPUT_CASES if "input" in args.only else []:
        with tempfile.TemporaryDirectory() as folder:
            arguments = case.make(Path(folder))
            said = _run(source, Path(folder), False, *arguments)
            print(f"| input: {case.name} | {arguments[0]} | {said} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
