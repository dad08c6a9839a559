"""Text that is not segdiff's, and brackets, print as the text they are:
rich read ``[jax]`` of ``pip install 'segdiff[jax]'`` as markup and printed
``pip install 'segdiff'``; a name of a file, a run or a host with brackets or an emoji code
lost them the same way in tables, titles, sentences and the progress bar."""

from __future__ import annotations

import io

import numpy as np
import pytest

import segdiff_gui.cli.commands.devices as devices_command
from segdiff_gui.cli.main import main
from segdiff_gui.cli.progress_view import _bar
from segdiff_gui.cli.summary import differences_table
from segdiff_gui.cli.sweep_view import print_sweep
from segdiff_gui.cli.text import TerminalConsole, say
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.runtimes import Runtime
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.core.sweep import SweepSummary, summarise_image

# What rich would take for markup, an emoji code and a style: each must print as it is.
BRACKETED = ("cell[bold]7[/].png", "lab[jax]", "a:smile:b", "[red]x[/red]", "cut[0.5]")


def _console(terminal: bool = False) -> tuple[TerminalConsole, io.StringIO]:
    written = io.StringIO()
    console = TerminalConsole(file=written, force_terminal=terminal, width=400, soft_wrap=True)
    return console, written


def test_devices_prints_the_install_hint_of_a_missing_runtime_with_its_extra(
    tmp_path, capsys, monkeypatch
):
    """``segdiff devices`` itself, with JAX and PyTorch not installed (and no runtime to
    probe, so no child starts)."""
    monkeypatch.setattr(devices_command, "installed_runtimes", lambda **_: ())
    monkeypatch.setattr(Runtime, "installed", lambda self: self.name not in ("jax", "torch"))
    assert main(["devices", "--cache", str(tmp_path / "cache")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Not installed: JAX (pip install 'segdiff[jax]'), PyTorch (pip install " in out
    assert "'segdiff[torch]')" in out


def _study(labels: tuple[str, ...]) -> GroupAnalysis:
    base = np.array([[0.2, 0.7], [0.4, 0.9]], dtype=np.float32)
    runs = [
        StudyRun(f"k{index}", label, RunConfig(batch=index + 1), 0, base + np.float32(index))
        for index, label in enumerate(labels)
    ]
    return GroupAnalysis(runs, cutoff=0.5)


def test_tables_titles_and_sentences_print_brackets_and_emoji_codes_as_text():
    console, written = _console()
    console.print(differences_table(_study(("cpu b1 r0", *BRACKETED)), BRACKETED[0]))
    summary = SweepSummary(reference="cpu b1", cutoff=0.5)
    for name in BRACKETED:
        summary.add(summarise_image(name, _study(("cpu b1 r0", "cpu b2 r0")), None))
    print_sweep(summary, console)
    say(console, f"Born in {BRACKETED[1]}: {BRACKETED[2]}")
    console.print(f"wrote the report to {BRACKETED[4]}")
    text = written.getvalue()
    for name in BRACKETED:
        assert text.count(name) >= 2, name  # the table and the sweep's images
    assert "\\[" not in text  # nor escaped twice
    assert "😄" not in text


@pytest.mark.parametrize("label", BRACKETED)
def test_the_progress_bar_shows_a_run_s_label_as_text(label):
    console, _ = _console(terminal=True)
    bar = _bar(console)
    bar.add_task(label, total=1)
    column = bar.columns[0]
    assert column(bar.tasks[0]).plain == label
