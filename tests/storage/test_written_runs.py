"""A run a child stored is said to the runner with what the file holds (storage/cache.
WrittenRun): the runner takes it for the file, checked as the file's attributes would be,
while the file is the one written; anything else is read from the file. And the attributes
are written through HDF5's own calls, the same bytes as h5py's ``attrs[name] = value``."""

from __future__ import annotations

import io
from dataclasses import replace

import h5py
import numpy as np
import pytest

from segdiff_gui.storage import ResultCache
from segdiff_gui.storage import cache as cache_module
from segdiff_gui.storage.cache import WrittenRun
from segdiff_gui.storage.hdf5_access import write_attributes
from segdiff_gui.storage.records import StoredAttributes
from tests.factories import make_record


def _said(tmp_path) -> tuple[ResultCache, WrittenRun]:
    record = make_record("m", np.linspace(0, 1, 30, dtype=np.float32).reshape(6, 5))
    written = ResultCache(tmp_path).write_run(record)
    # As the runner hears it: JSON, in a cache object of its own.
    heard = ResultCache(tmp_path)
    said = WrittenRun.from_dict(written.to_dict())
    assert said is not None
    return heard, said


def _count_file_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = cache_module.read_metadata

    def counted(group, where):
        reads.append(where)
        return real(group, where)

    monkeypatch.setattr(cache_module, "read_metadata", counted)
    return reads


def test_what_the_child_said_it_stored_is_the_files_record_without_reading_it(
    tmp_path, monkeypatch
):
    heard, said = _said(tmp_path)
    from_file = ResultCache(tmp_path).read_run(said.key, with_map=False)
    reads = _count_file_reads(monkeypatch)
    heard.remember_written(said)
    assert heard.read_run(said.key, with_map=False) == from_file
    assert reads == []
    # The map is still read from the file, and checked against the checksum said.
    full = heard.read_run(said.key)
    assert full.probabilities is not None and full.probabilities.shape == (6, 5)


def test_a_file_replaced_since_is_read_again(tmp_path, monkeypatch):
    heard, said = _said(tmp_path)
    path = heard.run_path(said.key)
    path.write_bytes(path.read_bytes())  # another file now: another inode and time
    reads = _count_file_reads(monkeypatch)
    heard.remember_written(said)
    heard.read_run(said.key, with_map=False)
    assert reads == [str(path)]


@pytest.mark.parametrize(
    "change",
    [
        {"run": {"label": "gpu b1 r0"}},  # no longer what the checksum was made of
        {"run": {"repeat": "0"}},  # text where a whole number belongs
        {"provenance": {"device": 7}},
        {"map_dtype": "object"},
        {"map_shape": [6, 5, 2]},
    ],
)
def test_attributes_said_wrongly_are_not_taken_and_the_file_is_read(tmp_path, monkeypatch, change):
    heard, said = _said(tmp_path)
    stored = said.stored
    forged = StoredAttributes(
        {**stored.run, **change.get("run", {})},
        {**stored.provenance, **change.get("provenance", {})},
        tuple(change.get("map_shape", stored.map_shape)),
        change.get("map_dtype", stored.map_dtype),
    )
    reads = _count_file_reads(monkeypatch)
    heard.remember_written(replace(said, stored=forged))
    record = heard.read_run(said.key, with_map=False)
    assert reads == [str(heard.run_path(said.key))]
    assert record.label == "cpu b1 r0"


@pytest.mark.parametrize(
    "said",
    [None, [], {"key": "x"}, {"key": "0" * 64, "identity": [1, 2], "run": {}, "provenance": {},
                              "map_shape": [1], "map_dtype": "<f4"}],
)  # fmt: skip
def test_what_is_not_a_written_run_is_no_written_run(said):
    assert WrittenRun.from_dict(said) is None


def test_attributes_are_the_bytes_h5py_writes():
    values = {"text": "a b é", "whole": 3, "large": 2**62, "negative": -5, "truth": True,
              "number": 0.25, "empty": ""}  # fmt: skip
    ours, theirs = io.BytesIO(), io.BytesIO()
    with h5py.File(ours, "w") as handle:
        write_attributes(handle, values)
    with h5py.File(theirs, "w") as handle:
        for name, value in values.items():
            handle.attrs[name] = value
    assert ours.getvalue() == theirs.getvalue()
    with h5py.File(ours, "r") as handle:
        assert {name: handle.attrs[name] for name in values} == values
