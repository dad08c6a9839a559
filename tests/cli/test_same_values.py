"""What ``--json`` prints is the value the API returns: one ``to_dict()`` each, not two dicts
built by hand (``segdiff ls`` and ``Runs.table()``, ``segdiff explain`` and ``Explanation``)."""

from __future__ import annotations

import json

from segdiff_gui import api
from tests.conftest import segdiff_here


def _records(table):
    return table if isinstance(table, list) else table.to_dict("records")


def test_ls_json_and_the_apis_table_list_the_same_keys_with_the_same_values(
    models, small_images, cache, capsys, fake_engine
):
    ran = segdiff_here(
        capsys, "run", models / "tiny.keras", *small_images, "--cache", cache.root,
        "--config", "batch=1", "--config", "batch=4,xla=on", "--repeats", "1",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    listed = json.loads(segdiff_here(capsys, "ls", "--cache", cache.root, "--json").stdout)
    assert len(listed) == 2 and len(listed[0]) == 13
    rows = {row["key"]: row for row in _records(api.open_cache(cache.root).table())}
    assert set(rows) == {entry["key"] for entry in listed}
    for entry in listed:
        row = json.loads(json.dumps(rows[entry["key"]], default=str))
        assert {name: row[name] for name in entry} == entry
        assert row["device"] == entry["provenance"]["device"] == "cpu:0"


def test_explain_json_is_the_apis_explanation(models, small_images, cache, capsys, fake_engine):
    ran = segdiff_here(
        capsys, "run", models / "tiny.keras", small_images[0], "--cache", cache.root,
        "--config", "batch=1", "--config", "batch=1,xla=on", "--repeats", "1",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    said = segdiff_here(
        capsys, "explain", "--from", "cpu b1 r0", "--to", "cpu b1 xla r0", "--cache", cache.root,
        "--json",
    )  # fmt: skip
    assert said.returncode == 0, said.stderr
    printed = json.loads(said.stdout)
    explanation = api.open_cache(cache.root).study().explain("cpu b1 r0", "cpu b1 xla r0")
    assert json.loads(json.dumps(explanation.to_dict(), default=str)) == printed
    assert printed["runs"].keys() == {"cpu b1 r0", "cpu b1 xla r0"}


def test_reproduce_json_is_the_apis_answer(models, small_images, cache, capsys, fake_engine):
    import numpy as np

    import segdiff_gui

    model = models / "tiny.keras"
    ran = segdiff_here(capsys, "run", model, small_images[0], "--cache", cache.root,
                       "--config", "batch=1", "--repeats", "1")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    mine = cache.root.parent / "mine.npy"
    np.save(mine, api.open_cache(cache.root).study().map("cpu b1 r0"))
    said = segdiff_here(capsys, "reproduce", mine, model, small_images[0], "--cache", cache.root,
                        "--json")  # fmt: skip
    assert said.returncode == 0, said.stderr
    printed = json.loads(said.stdout)
    found = segdiff_gui.reproduce(mine, model, small_images[:1], cache=cache.root, progress=False)
    returned = found.to_dict()
    assert printed.pop("command").startswith("segdiff run ") and returned.pop("run_arguments")
    assert returned == printed and printed["match"] == "cpu b1"
    assert all(isinstance(trial["changes"], list) for trial in printed["trials"])
