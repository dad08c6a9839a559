"""``segdiff ARGS`` run by :func:`segdiff_gui.cli.main.main` in the test process, answered as
the subprocess it stands for: the same exit code, standard output and standard error, without
a second of Python start-up. Its engine children are still children of their own (real ones,
or the fake engine where the test asks for it), so TensorFlow never enters this process."""

from __future__ import annotations

import subprocess

import pytest

from segdiff_gui.cli.main import main

__all__ = ["segdiff_here"]


def segdiff_here(
    capsys: pytest.CaptureFixture[str], *args: object
) -> subprocess.CompletedProcess[str]:
    capsys.readouterr()  # what the test printed before is not this command's
    try:
        code = main([str(arg) for arg in args])
    except SystemExit as exit_:  # argparse's usage errors: exit code 2, its message on stderr
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([str(arg) for arg in args], code, out, err)
