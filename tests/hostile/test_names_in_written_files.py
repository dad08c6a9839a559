"""Names in the files segdiff writes for machines and people (held cases of the
review, kept here). A model, an image and an output named with the corpus's names (nested
tables, terminal escapes, a forged line, a right-to-left override, 10,000 characters) are data
in JSON (strict JSON, no raw control character, the name there as stored) and in CSV (each
row keeps the header's columns), and text in the report's layer and repair sections, whose
layers a model names. (The terminal's and the window's are ``test_names_in_stored_runs``'s and
``tests/ui/test_hostile_names.py``'s; a notebook's text and HTML, the former's too.)"""

from __future__ import annotations

import csv
import json
import re

import numpy as np

from segdiff_gui.core.layer_stats import LayerComparison, compare_layer
from segdiff_gui.io.html_layers import layer_probe_sections, repair_sections
from tests.conftest import segdiff_here
from tests.factories import hostile_names_cache
from tests.hostile.names import HOSTILE_NAMES, NESTED_TABLES

SCRIPT = "<script>alert(1)</script>"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202e]")


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_and_csv_carry_hostile_names_as_data(tmp_path, capsys):
    cache = hostile_names_cache(tmp_path / "cache")
    at = ("--cache", cache.root)
    listed = segdiff_here(capsys, "ls", *at, "--json")
    compared = segdiff_here(capsys, "compare", *at, "--json")
    assert listed.returncode == compared.returncode == 0, listed.stderr + compared.stderr
    runs = _strict(listed.stdout)
    assert isinstance(runs, list)
    for field, name in (("model", "model_name"), ("image", "target_name")):
        stored = {getattr(record, name) for record in cache.records()}
        assert {run[field] for run in runs} == stored and len(stored) == len(HOSTILE_NAMES)
    _strict(compared.stdout)
    pair = ("--ref", "cpu b1 r0", "--other", "cpu b64 r0")
    for group in sorted({run["group"] for run in runs}):
        report, pixels = tmp_path / f"{group}.json", tmp_path / f"{group}.csv"
        made = segdiff_here(capsys, "report", *at, "--group", group, "--json", report)
        exported = segdiff_here(capsys, "export", *at, "--group", group, *pair, "--csv", pixels)
        assert made.returncode == exported.returncode == 0, made.stderr + exported.stderr
        for text in (listed.stdout, compared.stdout, report.read_text()):
            assert not _CONTROL.search(text)  # escaped by JSON: \u001b, \n, \u202e
        _strict(report.read_text())
        with pixels.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        assert len(rows) > 1 and all(len(row) == len(rows[0]) for row in rows), group


def test_the_reports_layer_and_repair_sections_show_layer_names_as_text():
    """A model's layers are named by whoever made it; the report's layer probe section (its
    sentences, table and chart) and the repair's Keras code show them escaped."""
    rng = np.random.default_rng(3)
    names = (*HOSTILE_NAMES, SCRIPT, 'x"><img src=x onerror=alert(1)>')
    stats = []
    for name in names:
        values = rng.random(16, dtype=np.float32)
        stats.append(compare_layer(name, values, values + np.float32(1e-3)))
    comparison = LayerComparison(tuple(stats)).to_dict()
    probe = {
        **comparison,
        "reference": {"label": f"cpu b1 {SCRIPT}"},
        "other": {"label": NESTED_TABLES},
        "sentences": [f"The first layer that differs is {name}." for name in names],
    }
    repair = {"sentences": [f"Keep {SCRIPT} in float32."], "code": f"keep = [{SCRIPT!r}]"}
    page = layer_probe_sections([probe]) + repair_sections([repair])
    assert SCRIPT not in page and "<img" not in page and "<table><tr><td><table>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<svg") == 1 and page.count("</svg>") == 1
