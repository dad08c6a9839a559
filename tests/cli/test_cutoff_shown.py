"""The cutoff shown is the cutoff counted: ``--cutoff 0.5500041246414185``
counts flips at the float32 0.5500041 and was shown as "flips @ 0.550004", while
``--cutoff 0.550004`` (another float32) gives no flip. Every command shows the shortest text
that reads back as the float32 the flips were counted at, and its JSON gives that number."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segdiff_gui.cli.main import main
from segdiff_gui.storage import ResultCache
from tests.factories import make_record, two_configurations_cache

TYPED = "0.5500041246414185"
COUNTED = "0.5500041"  # np.float32(TYPED), shortest
ROUNDED = "0.550004"  # what %g made of it: a cutoff of its own, with no flip here


@pytest.fixture
def cache(tmp_path) -> ResultCache:
    """Two runs that differ by one float32 step at one pixel, just at the float32 of TYPED."""
    cache = ResultCache(tmp_path / "cache")
    at = np.float32(TYPED)
    reference = np.full((4, 4), 0.25, np.float32)
    reference[1, 2] = at
    other = reference.copy()
    other[1, 2] = np.nextafter(at, np.float32(0))  # below the cutoff: a flip
    for values, label in ((reference, "cpu b1 r0"), (other, "cpu b64 r0")):
        cache.write_run(make_record("m", values, label))
    return cache


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return " ".join(capsys.readouterr().out.split())


def test_compare_shows_and_counts_the_float32_cutoff(cache, capsys):
    root = str(cache.root)
    shown = _run(capsys, "compare", "--cache", root, "--cutoff", TYPED)
    assert f"flips @ {COUNTED}" in shown and f"cutoff {COUNTED}" in shown
    assert ROUNDED + " " not in shown and ROUNDED + ")" not in shown
    data = json.loads(_run(capsys, "compare", "--cache", root, "--cutoff", TYPED, "--json"))
    assert data[0]["cutoff"] == float(COUNTED)
    assert [row["flips"] for row in data[0]["comparisons"]] == [1]
    # The cutoff the old text showed is another float32, and counts no flip.
    rounded = json.loads(_run(capsys, "compare", "--cache", root, "--cutoff", ROUNDED, "--json"))
    assert [row["flips"] for row in rounded[0]["comparisons"]] == [0]


def test_reports_explain_sweep_and_export_show_the_float32_cutoff(cache, capsys, tmp_path):
    root = str(cache.root)
    html, report = tmp_path / "r.html", tmp_path / "r.json"
    _run(capsys, "report", "--cache", root, "--cutoff", TYPED, "--html", str(html))
    _run(capsys, "report", "--cache", root, "--cutoff", TYPED, "--json", str(report))
    page = html.read_text(encoding="utf-8")
    assert f"flips @ {COUNTED}" in page and f"at cutoff <b>{COUNTED}</b>" in page
    assert f"cutoff {COUNTED}</text>" in page  # the curve's marker
    assert json.loads(report.read_text(encoding="utf-8"))["cutoff"] == float(COUNTED)
    explained = _run(
        capsys, "explain", "--cache", root, "--from", "cpu b1 r0", "--to", "cpu b64 r0",
        "--cutoff", TYPED,
    )  # fmt: skip
    assert f"flips @ {COUNTED}" in explained
    swept = _run(capsys, "sweep", "--cache", root, "--cutoff", TYPED)
    assert f"at cutoff {COUNTED}" in swept
    mask = tmp_path / "flips.png"
    exported = _run(
        capsys, "export", "--cache", root, "--ref", "cpu b1 r0", "--other", "cpu b64 r0",
        "--cutoff", TYPED, "--mask", str(mask),
    )  # fmt: skip
    assert f"at cutoff {COUNTED} (1 flipped pixel)" in exported
    for text in (page, explained, swept, exported):
        assert ROUNDED + " " not in text and ROUNDED + "<" not in text


def test_a_softmax_maps_export_says_argmax_not_a_cutoff_it_never_used(tmp_path, capsys):
    """A multi-class map's classes are its argmax: ``export`` said "at cutoff 0.5" of it."""
    cache = two_configurations_cache(tmp_path, "softmax")
    exported = _run(
        capsys, "export", "--cache", str(cache.root), "--ref", "cpu b1 r0", "--other",
        "cpu b64 r0", "--mask", str(tmp_path / "flips.png"),
    )  # fmt: skip
    assert "cpu b64 r0 against cpu b1 r0 at argmax (" in exported
    assert "cutoff" not in exported
