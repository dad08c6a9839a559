from dataclasses import replace

import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage.selection import select_run, select_runs
from tests.factories import make_record


def records():
    zeros = np.zeros((2, 2), np.float32)
    return [
        replace(make_record("1", zeros, label="cpu b1 r0"), key="ab" + "0" * 62),
        replace(make_record("2", zeros, label="cpu b64 r0"), key="ac" + "0" * 62),
        replace(make_record("3", zeros, label="cpu b64 r0"), key="bb" + "0" * 62),
    ]


def test_names_are_id_prefixes_or_labels():
    assert select_run(records(), "ab").label == "cpu b1 r0"
    assert select_run(records(), "cpu b1 r0").key.startswith("ab")
    with pytest.raises(InputError, match=r"a: is ambiguous: ab000000 \(cpu b1 r0"):
        select_run(records(), "a")
    with pytest.raises(InputError, match="cpu b64 r0: is ambiguous"):
        select_run(records(), "cpu b64 r0")
    with pytest.raises(InputError, match="zz: names no run in the cache"):
        select_run(records(), "zz")


def test_a_label_selects_every_run_that_has_it_for_bundles():
    chosen = select_runs(records(), ["cpu b64 r0", "ac"])
    assert sorted(r.key[:2] for r in chosen) == ["ac", "bb"]
    with pytest.raises(InputError, match="is ambiguous"):
        select_runs(records(), ["a"])
