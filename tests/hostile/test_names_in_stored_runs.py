"""Every command that reads stored runs prints the corpus's names as text: a
model, an image and an output named with nested tables, terminal escapes, a forged line, a
right-to-left override and 10,000 characters (a file's name holds 255 at most). Reports and
CSV files carry them escaped; no name takes more than its few lines of output. The commands
run in this process (``segdiff``'s own ``main``, its output captured as a pipe's), as does the
API's text and HTML of the same runs; the window's labels are ``tests/ui/test_hostile_names.py``'s.
"""

import json
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from segdiff_gui import api
from segdiff_gui.cli.main import main
from segdiff_gui.storage import ResultCache
from tests.factories import hostile_names_cache, make_record
from tests.hostile.names import HOSTILE_NAMES, NESTED_TABLES, TERMINAL_CONTROLS


@pytest.fixture
def segdiff(capsys):
    """``segdiff ARGS`` in this process, answered as the subprocess it stands for."""

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        code = main([str(arg) for arg in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def _assert_text(text: str, command: str) -> None:
    assert not any(control in text for control in TERMINAL_CONTROLS), command
    assert not any(line.lstrip("│┃ ").startswith("FAIL forged") for line in text.splitlines())
    assert "<table><tr><td>" in text, command  # the name is shown, as the text it is


def test_every_command_on_stored_runs_prints_hostile_names_as_text(tmp_path, segdiff):
    cache = hostile_names_cache(tmp_path / "cache")
    at = ("--cache", cache.root)
    listed = json.loads(segdiff("ls", *at, "--json").stdout)
    groups = sorted({run["group"] for run in listed})
    assert len(listed) == 2 * len(HOSTILE_NAMES) and len(groups) == len(HOSTILE_NAMES)
    bundle = tmp_path / "runs.h5"
    said = {}
    for command in (("ls",), ("compare",), ("check", "--max-flips", "0"), ("diagnose",)):
        said[command[0]] = segdiff(*command, *at)
    said["bundle"] = segdiff("bundle", bundle, *at)
    said["merge"] = segdiff("merge", bundle, "--cache", tmp_path / "other")
    said["ls merged"] = segdiff("ls", "--cache", tmp_path / "other")
    pair = ("--ref", "cpu b1 r0", "--other", "cpu b64 r0")
    for group in groups:
        html, csv = tmp_path / f"{group}.html", tmp_path / f"{group}.csv"
        report = ("report", "--group", group, "--html", html, "--json", tmp_path / "r.json")
        said[f"report {group}"] = segdiff(*report, *at)
        said[f"export {group}"] = segdiff("export", "--group", group, *pair, "--csv", csv, *at)
        said[f"explain {group}"] = segdiff(
            "explain", "--group", group, "--from", "cpu b1 r0", "--to", "cpu b64 r0", *at
        )
        page = html.read_text()
        assert "<table><tr><td><table>" not in page  # escaped: it is text in the report
        assert not any(control in page + csv.read_text() for control in TERMINAL_CONTROLS)
    for command, result in said.items():
        assert result.returncode in (0, 1), (command, result.stderr[-300:])
        if command in ("ls", "compare", "check", "diagnose", "ls merged"):  # every group
            _assert_text(result.stdout + result.stderr, command)
        else:  # one group's, or the files written
            assert not any(c in result.stdout + result.stderr for c in TERMINAL_CONTROLS)
        # A name is said a few times, never repeated without end: the longest output here
        # holds each of the 12 runs' names a handful of times.
        assert len(result.stdout) < 40 * (len(NESTED_TABLES) + 10_000), command


def test_markup_and_control_characters_from_a_bundle_reach_no_terminal(tmp_path, segdiff):
    values = np.linspace(0.3, 0.7, 32 * 32, dtype=np.float32).reshape(32, 32)
    cache = ResultCache(tmp_path / "cache")
    for label in ("cpu b1 r0", "cpu b4 r0"):
        record = make_record("m", values, label)
        evil = record.provenance.updated({"hostname": "[/]evil\x1b[2J\nFAIL forged"})
        cache.write_run(replace(record, provenance=evil, target_name="t[/bold].png\x1b]0;"))
    for command in (("ls",), ("compare",), ("check",), ("diagnose",)):
        result = segdiff(*command, "--cache", cache.root)
        assert result.returncode in (0, 1), result.stderr
        assert "\x1b" not in result.stdout + result.stderr
        assert not any(line.startswith("FAIL forged") for line in result.stdout.splitlines())
    listed = segdiff("ls", "--cache", cache.root).stdout
    assert "[/]evil" in listed and "t[/bold].png" in listed  # shown as the text it is


def test_the_api_shows_hostile_names_as_text(tmp_path):
    """A notebook's text and HTML of stored runs: a name is text, never markup or a control."""
    cache = hostile_names_cache(tmp_path / "cache")
    runs = api.open_cache(cache.root)
    texts, pages = [repr(runs)], [runs._repr_html_()]
    for group in sorted({record.model_name for record in cache.records()}):
        study = runs.study(model=group)
        compared = study.compare()
        texts += [repr(study), repr(compared), repr(study.diagnose())]
        pages += [study._repr_html_(), compared._repr_html_()]
    for text in texts:
        assert not any(control in text for control in TERMINAL_CONTROLS), text[:200]
    assert any("<table><tr><td>" in text for text in texts)  # the name is shown, as text
    for page in pages:
        assert "<table><tr><td><table>" not in page  # escaped: it is text in the page
        assert not any(control in page for control in TERMINAL_CONTROLS)
    assert any("&lt;table&gt;" in page for page in pages)
