"""Every crafted bundle of the corpus, read in this process by the functions each front end
reads a bundle with: ``merge_bundle`` (``segdiff merge``), and ``read_source`` with
``analyses`` (``compare``, ``check``, ``report`` … ``--bundle``, and the API's
``open_bundle``; the window's ``--open`` reads through the same ``BundleReader.scan`` and
``read_run``, in ``ui/session.BundleSession``). Each must refuse the crafted run in one line
naming the bundle and what is wrong (never another exception), merge nothing, go on showing
the other runs, read or change nothing outside, in bounded memory and time.

How each front end shows such a line (its exit code, its stream) is tested once, in
``test_front_ends.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.storage import ResultCache, merge_bundle, write_bundle
from segdiff_gui.storage.bundle import BundleReader
from segdiff_gui.storage.loading import analyses, read_source
from segdiff_gui.ui.app import _parser, open_session
from tests.factories import bundle_of, make_record
from tests.hostile.corpus import (
    BUNDLE_CASES,
    SECRET,
    WHOLE_BUNDLE_CASES,
    Case,
    base_bundle,
    json_provenance,
)
from tests.hostile.expect import assert_one_line, bounded_memory, files_under

# A crafted file that makes a read wait (a FIFO) fails its case instead of blocking the run;
# "thread": a read blocked inside HDF5 never returns to Python to see a signal.
pytestmark = pytest.mark.timeout(60, method="thread")


@pytest.fixture
def crafted(tmp_path):
    def make(case: Case) -> tuple[Path, Path]:
        bundle, outside = tmp_path / "crafted.h5", tmp_path / "outside"
        outside.mkdir()
        base_bundle(bundle, tmp_path)
        case.craft(bundle, outside)
        return bundle, outside

    return make


def _laptop(root: Path) -> ResultCache:
    """A cache that already holds a run of its own: a refused merge must leave it as it is."""
    cache = ResultCache(root)
    cache.write_run(make_record("laptop", np.full((32, 32), 0.5, np.float32)))
    return cache


@pytest.mark.parametrize("case", BUNDLE_CASES, ids=lambda case: case.name)
def test_a_crafted_bundle_costs_only_its_run(case, crafted, tmp_path):
    bundle, outside = crafted(case)
    outside_before = files_under(outside)
    laptop = _laptop(tmp_path / "laptop")
    laptop_before = sorted(laptop.keys())

    with bounded_memory():
        with pytest.raises(InputError) as refused:  # segdiff merge: all or nothing
            merge_bundle(bundle, laptop)
        source = read_source(BundleReader(bundle), "", lambda damaged: None)  # read in place
        studies = analyses(source, 0.5)

    assert_one_line(refused.value, bundle, case.problem)
    assert str(refused.value).endswith("nothing was merged")
    assert sorted(laptop.keys()) == laptop_before
    assert source.damaged, "the crafted run was read as if whole"
    assert_one_line(source.damaged[0], bundle, case.problem)  # the first line a command says
    shown = [run.label for run in studies[0].study.runs]  # the group a window shows first
    assert "cpu b1 r1" in shown and len(shown) in (2, 3), shown  # the good runs still are

    assert files_under(outside) == outside_before  # nothing outside deleted or changed
    for content in files_under(laptop.root).values():
        assert SECRET[:40] not in content  # and nothing outside read into the cache


# Each way a bundle is opened: in place (the CLI's --bundle, the API), merged, in the window.
_OPENINGS = {
    "in place": lambda bundle, cache: read_source(BundleReader(bundle), "", lambda d: None),
    "merge": merge_bundle,
    "window": lambda bundle, cache: open_session(_parser().parse_args(["--open", str(bundle)])),
}


@pytest.mark.parametrize("opening", _OPENINGS)
@pytest.mark.parametrize("case", WHOLE_BUNDLE_CASES, ids=lambda case: case.name)
def test_a_bundle_broken_as_a_whole_is_one_line_everywhere(case, opening, crafted, tmp_path):
    bundle, _ = crafted(case)
    laptop = ResultCache(tmp_path / "laptop")
    with bounded_memory(), pytest.raises(InputError) as refused:
        _OPENINGS[opening](bundle, laptop)
    assert_one_line(refused.value, bundle, case.problem)
    assert not laptop.keys()


def test_a_bundle_whose_image_is_too_large_is_not_merged(crafted, tmp_path):
    # 8 GiB of float64 declared in a few MB: the image enters the cache with the runs.
    def craft(path: Path, outside: Path) -> None:
        with h5py.File(path, "r+") as handle:
            images = handle["images"]
            (name,) = list(images)
            del images[name]
            images.create_dataset(name, shape=(16384, 16384, 4), dtype="<f8", chunks=(256, 256, 4),
                                  compression="gzip", shuffle=True)  # fmt: skip

    bundle, _ = crafted(Case("image", craft, ""))
    laptop = ResultCache(tmp_path / "laptop")
    with bounded_memory(), pytest.raises(InputError) as refused:
        merge_bundle(bundle, laptop)
    assert_one_line(refused.value, bundle, "GiB, over segdiff's limit")
    assert not laptop.keys()


def test_a_run_linked_under_many_names_is_refused_before_its_map_is_read(tmp_path):
    # One whole run hard-linked under 16 more keys: each copy's map was read (and kept, in its
    # error's traceback) before its name was compared with its key, 4 GB of an 8192² run's.
    # A 4096² run (64 MB) shows it: its 17 maps are past the bound the merge is read within.
    record = make_record("big", np.zeros((4096, 4096), np.float32))
    bundle = bundle_of([record], tmp_path / "linked.h5", ResultCache(tmp_path / "source"))
    with h5py.File(bundle, "r+") as handle:
        for index in range(16):
            handle["runs"][f"{index:064x}"] = handle["runs"][record.key]
    started = time.perf_counter()
    with bounded_memory(512 << 20), pytest.raises(InputError) as refused:
        merge_bundle(bundle, ResultCache(tmp_path / "laptop"))
    assert_one_line(refused.value, bundle, "claims to be run")
    assert "(and 15 more damaged runs)" in str(refused.value)
    assert time.perf_counter() - started < 20


def test_values_past_64_bits_are_kept_as_they_were(crafted, tmp_path):
    bundle, _ = crafted(Case("big", json_provenance("x", json.dumps(2**64)), ""))
    laptop = ResultCache(tmp_path / "laptop")
    merge_bundle(bundle, laptop)
    assert {laptop.read_run(key).provenance.to_dict().get("x") for key in laptop.keys()} >= {2**64}
    assert write_bundle(laptop, laptop.keys(), tmp_path / "again.h5") == 3


def test_the_memory_bound_refuses_what_a_bomb_would_ask():
    """The bound the cases are read within bites here (a bomb's few GB would fail at once),
    and is lifted after."""
    with bounded_memory(), pytest.raises(MemoryError):
        np.empty(2 << 30, np.uint8)
    assert np.empty(2 << 30, np.uint8).nbytes == 2 << 30
