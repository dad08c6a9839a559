"""The cache's layer store: probes written in pieces and read back checked,
comparisons stored whole, the disk budget, and damaged entries refused in one line."""

from __future__ import annotations

import dataclasses
import os
import shutil

import h5py
import numpy as np
import pytest

from segdiff_gui.core.layer_stats import LayerComparison, compare_layer
from segdiff_gui.runner.layers import LayerProbe, compare_stored, final_maps_of
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.hdf5_access import UnreadableEntry
from segdiff_gui.storage.layers import LayerStore, StoredComparison, comparison_key, probe_key


def _meta(run: str, **more: object) -> dict[str, object]:
    """What the engine records of the run a probe is of (engine/probe_finish.py)."""
    return {"run_key": run, "probe_key": probe_key(run), "label": run[:4], **more}


def _sides(reference_run: str, other_run: str) -> tuple[str, dict, dict]:
    """A comparison's key and its two sides, as the runner makes them."""
    reference, other = _meta(reference_run), _meta(other_run)
    return comparison_key(reference["probe_key"], other["probe_key"]), reference, other


def _write(store: LayerStore, run: str, layers: dict[str, np.ndarray], budget: int) -> str:
    key = probe_key(run)
    with store.write_probe(key, budget) as writer:
        for name, values in layers.items():
            writer.add(name, "Conv2D", "float32", (1, *values.shape), values)
        writer.finish(_meta(run, final={"bitwise_equal": True}), np.zeros((4, 4)))
    return key


def _layers(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "conv": rng.standard_normal((64, 32, 8)).astype(np.float32),
        "pool": rng.standard_normal((32, 16, 8)).astype(np.float32),
        "dense": rng.standard_normal((10,)).astype(np.float32),
    }


def test_a_probe_in_pieces_reads_back_bit_for_bit_and_compares_like_whole_layers(tmp_path):
    store = LayerStore(ResultCache(tmp_path / "cache"))
    reference, other = _layers(1), _layers(1)
    other["pool"][3, 4, 5] += 1e-3
    small, large = "a" * 64, "b" * 64
    # 128 KiB of memory: pieces of 16 KiB, so the 64 KiB conv layer is stored in 4 pieces.
    first = _write(store, small, reference, 128 << 10)
    second = _write(store, large, other, 512 << 20)  # one piece per layer
    with store.open_probe(first) as a, store.open_probe(second) as b:
        assert len(list(a.pieces(0))) == 4 and len(list(b.pieces(0))) == 1
        for index, values in enumerate(reference.values()):
            assert np.array_equal(a.layer(index), values)
    with h5py.File(store.probe_path(first)) as plain:  # any HDF5 reads it with its filters
        assert np.array_equal(plain["layers/00000/p00001"][()], reference["conv"][16:32])
    with store.open_probe(first) as a, store.open_probe(second) as b:
        comparison, spatial = compare_stored(a, b)
    direct = [compare_layer(n, reference[n], other[n]) for n in reference]
    for stored, expected in zip(comparison.layers, direct, strict=True):
        assert stored.max_abs == expected.max_abs and stored.max_ulp == expected.max_ulp
        assert stored.differing_fraction == expected.differing_fraction
        assert stored.relative_error == pytest.approx(expected.relative_error, rel=1e-12)
    assert comparison.first_differing is not None and comparison.first_differing.name == "pool"
    assert set(spatial) == {0, 1}  # the vector has no map
    assert (
        spatial[1][3, 4] == pytest.approx(1e-3, rel=1e-3) and spatial[1].sum() == spatial[1][3, 4]
    )


def test_a_comparison_is_stored_whole_and_a_damaged_one_is_one_line(tmp_path):
    store = LayerStore(ResultCache(tmp_path / "cache"))
    a, b = _layers(2), _layers(3)
    stats = LayerComparison(tuple(compare_layer(n, a[n], b[n]) for n in a))
    key, reference, other = _sides("c" * 64, "d" * 64)
    maps = (np.full((4, 4), 0.25, np.float32), np.full((4, 4), 0.75, np.float32))
    spatial = {0: np.ones((64, 32), np.float32)}
    stored = StoredComparison(key, reference, other, stats, spatial, maps, "probe")
    store.write_comparison(stored)
    back = store.read_comparison(key)
    assert back is not None and back.comparison == stats and back.final_source == "probe"
    assert np.array_equal(back.spatial[0], spatial[0]) and np.array_equal(
        back.final_maps[1], maps[1]
    )
    path = store.comparison_path(key)
    with h5py.File(path, "r+") as handle:  # tampered: one value of a final map changed
        handle["final/other"][0, 0] = 0.5
    with pytest.raises(UnreadableEntry) as caught:
        store.read_comparison(key)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_the_disk_budget_removes_the_least_recently_used_probes_only(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    store = LayerStore(cache)
    keys = [_write(store, str(i) * 64, _layers(i), 512 << 20) for i in range(3)]
    for age, key in enumerate(keys):  # the first is the oldest
        os.utime(store.probe_path(key), (1000 + age, 1000 + age))
    with store.open_probe(keys[0]):  # … until it is used again
        pass
    one = store.probe_path(keys[1]).stat().st_size
    removed = store.keep_within(store.tensor_bytes() - one)
    assert removed == [keys[1]]
    assert store.has_probe(keys[0]) and store.has_probe(keys[2])
    assert store.keep_within(0) and store.tensor_bytes() == 0
    (tmp_path / "mine.txt").write_text("the user's")  # never touched: outside the store
    assert (tmp_path / "mine.txt").exists()


def test_a_probe_that_changed_its_final_map_is_measured_by_its_own_and_says_so(tmp_path):
    """Where computing layer by layer changed the numerics (a runtime fusing across layers),
    the output's figures come from the probes' own final maps, and the sentences say why."""
    store = LayerStore(ResultCache(tmp_path / "cache"))
    keys = []
    for run, exact, value in (("a" * 64, True, 0.4), ("b" * 64, False, 0.6)):
        key = probe_key(run)
        with store.write_probe(key, 512 << 20) as writer:
            writer.add("out", "Conv2D", "float32", (1, 4, 4, 1), np.full((4, 4, 1), value))
            final = {"bitwise_equal": exact, "differing_pixels": 0 if exact else 5, "max_ulp": 3}
            writer.finish(_meta(run, final=final), np.full((4, 4), value, np.float32))
        keys.append(key)

    def plain() -> tuple[np.ndarray, np.ndarray]:
        raise AssertionError("the plain runs are not what the probe measured")

    with store.open_probe(keys[0]) as a, store.open_probe(keys[1]) as b:
        maps, source = final_maps_of(a, b, plain)
        comparison, spatial = compare_stored(a, b)
    assert source == "probe" and float(maps[1][0, 0]) == pytest.approx(0.6)
    stored = StoredComparison("f" * 64, a.meta, b.meta, comparison, spatial, maps, source)
    sentences = LayerProbe(stored, True, False).sentences(0.5)
    assert "At the output (the probes' own maps): 16 of 16 pixels differ" in sentences[-2]
    assert "16 flips at cutoff 0.5" in sentences[-2]
    assert "differs from its run in 5 pixels (up to 3 ULP)" in sentences[-1]
    assert "figures are the probe's own" in sentences[-1]


def test_a_converted_comparisons_unmatched_layers_are_kept_and_checked(tmp_path):
    """A converted runtime's probe leaves out the layers it has no tensor for: the stored
    comparison keeps their names; a comparison stored before that lists none."""
    store = LayerStore(ResultCache(tmp_path / "cache"))
    a, b = _layers(2), _layers(3)
    stats = LayerComparison(tuple(compare_layer(n, a[n], b[n]) for n in a), ("enc/norm",))
    key, reference, other = _sides("e" * 64, "f" * 64)
    maps = (np.full((4, 4), 0.25, np.float32), np.full((4, 4), 0.75, np.float32))
    store.write_comparison(StoredComparison(key, reference, other, stats, {}, maps, "plain runs"))
    assert store.read_comparison(key).comparison.unmatched == ("enc/norm",)
    path = store.comparison_path(key)
    with h5py.File(path, "r+") as handle:
        del handle.attrs["unmatched"]  # as an older comparison was stored
    assert store.read_comparison(key).comparison.unmatched == ()
    with h5py.File(path, "r+") as handle:
        handle.attrs["unmatched"] = '{"not": "a list"}'
    with pytest.raises(UnreadableEntry, match="unmatched layers segdiff did not write"):
        store.read_comparison(key)


def test_another_runs_probe_copied_to_a_probes_place_is_refused(tmp_path):
    """Run X's probe file at run Y's probe path gave X's layer errors under
    Y's title. Its key is recomputed from the run it records, so it is refused (and probed
    again by the runner, which takes a refused probe for a missing one)."""
    store = LayerStore(ResultCache(tmp_path / "cache"))
    x, y = _write(store, "a" * 64, _layers(1), 512 << 20), probe_key("b" * 64)
    store.probe_path(y).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(store.probe_path(x), store.probe_path(y))
    with pytest.raises(UnreadableEntry, match="holds another run's probe than its name says"):
        store.open_probe(y)
    with store.open_probe(x) as tensors:  # the original is still itself
        assert tensors.meta["run_key"] == "a" * 64


def test_a_comparison_of_other_runs_copied_to_a_comparisons_place_is_refused(tmp_path):
    store = LayerStore(ResultCache(tmp_path / "cache"))
    a, b = _layers(2), _layers(3)
    stats = LayerComparison(tuple(compare_layer(n, a[n], b[n]) for n in a))
    key, reference, other = _sides("c" * 64, "d" * 64)
    maps = (np.zeros((4, 4), np.float32), np.ones((4, 4), np.float32))
    store.write_comparison(StoredComparison(key, reference, other, stats, {}, maps, "probe"))
    elsewhere, _, _ = _sides("e" * 64, "f" * 64)
    target = store.comparison_path(elsewhere)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(store.comparison_path(key), target)
    with h5py.File(target, "r+") as handle:  # even with the name it was put under
        handle.attrs["key"] = elsewhere
    with pytest.raises(UnreadableEntry, match="compares other runs than its name says"):
        store.read_comparison(elsewhere)


def test_a_full_disk_while_a_probe_file_is_made_is_one_line_not_hdf5s_text(tmp_path, monkeypatch):
    """HDF5 says a full disk as "Unable to synchronously create file (file write
    failed: time = …, errno = 28, …)"; segdiff says it in its own line, naming the folder."""
    import h5py as real

    from segdiff_gui.core.errors import InputError
    from segdiff_gui.storage import cache as cache_module

    said = (
        "Unable to synchronously create file (file write failed: time = Fri Dec  4 2026, "
        "filename = 'x', file descriptor = 7, errno = 28, error message = 'No space left on "
        "device', buf = 0x1, total write size = 96, bytes this sub-write = 96, bytes actually "
        "written = 18446744073709551615, offset = 0)"
    )

    class FullDisk:
        @staticmethod
        def File(*_args, **_kwargs):  # noqa: N802 - h5py's own name
            raise OSError(said)

    store = LayerStore(ResultCache(tmp_path / "cache"))
    monkeypatch.setattr(cache_module, "h5py", FullDisk)
    with pytest.raises(InputError) as caught, store.write_probe(probe_key("a" * 64), 1 << 20):
        pass
    text = str(caught.value)
    assert "no space left on its disk" in text and "\n" not in text and "errno" not in text
    assert not list((tmp_path / "cache").rglob("*.tmp"))
    assert real.File  # the real module is untouched for the other tests


# A probe's layer description and a comparison's figures as a hostile file gives them.
BAD_QUANTIZATION = {  # (scale, zero point) as JSON text
    "a zero point past float's range": ("0.5", "1e999"),
    "a zero point past int32's": ("0.5", "99999999999999999999"),
    "a fractional zero point": ("0.5", "3.5"),
    "a NaN scale": ("NaN", "0"),
    "an infinite scale": ("Infinity", "0"),
    "a negative scale": ("-0.5", "0"),
    "a zero scale": ("0", "0"),
    "a scale past float's range": ("9" * 400, "0"),
}


def _hostile(text: str, case: str, shape: str) -> str:
    """``text`` (JSON of a scale 0.5, a zero point -3 and ``shape``) made hostile."""
    if case in BAD_QUANTIZATION:
        scale, zero_point = BAD_QUANTIZATION[case]
        changed = text.replace('"scale":0.5', f'"scale":{scale}')
        changed = changed.replace('"zero_point":-3', f'"zero_point":{zero_point}')
    else:
        changed = text.replace(f'"shape":{shape}', f'"shape":{shape.replace(",", ",1e999,", 1)}')
    assert changed != text
    return changed


@pytest.mark.parametrize("case", [*BAD_QUANTIZATION, "a shape past float's range"])
def test_a_probe_s_layer_of_a_hostile_scale_zero_point_or_shape_is_one_line(tmp_path, case):
    store = LayerStore(ResultCache(tmp_path / "cache"))
    key = probe_key("e" * 64)
    with store.write_probe(key, 1 << 20) as writer:
        writer.add("conv", "Conv2D", "int8", (1, 4, 4, 2), np.zeros((4, 4, 2)), (0.5, -3))
        writer.finish(_meta("e" * 64, final={"bitwise_equal": True}), np.zeros((4, 4)))
    with store.open_probe(key) as good:
        assert (good.layers[0].scale, good.layers[0].zero_point) == (0.5, -3)
    path = store.probe_path(key)
    with h5py.File(path, "r+") as handle:
        text = handle["layers/00000"].attrs["layer"]
        text = text.decode() if isinstance(text, bytes) else str(text)
        handle["layers/00000"].attrs["layer"] = _hostile(text, case, "[4,4,2]")
    with pytest.raises(UnreadableEntry) as caught:
        store.open_probe(key)
    line = str(caught.value)
    assert str(path) in line and "is not a layer's description" in line and "\n" not in line


@pytest.mark.parametrize("case", [*BAD_QUANTIZATION, "a shape past float's range"])
def test_a_comparison_s_figures_of_a_hostile_scale_zero_point_or_shape_are_one_line(tmp_path, case):
    store = LayerStore(ResultCache(tmp_path / "cache"))
    a, b = _layers(2), _layers(3)
    layers = [compare_layer(n, a[n], b[n]) for n in a]
    layers[0] = dataclasses.replace(layers[0], scale=0.5, zero_point=-3)
    stats = LayerComparison(tuple(layers))
    key, reference, other = _sides("c" * 64, "d" * 64)
    maps = (np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32))
    store.write_comparison(StoredComparison(key, reference, other, stats, {}, maps, "probe"))
    path = store.comparison_path(key)
    with h5py.File(path, "r+") as handle:
        text = handle.attrs["layers"]
        text = text.decode() if isinstance(text, bytes) else str(text)
        handle.attrs["layers"] = _hostile(text, case, "[64,32,8]")
    with pytest.raises(UnreadableEntry) as caught:
        store.read_comparison(key)
    line = str(caught.value)
    assert str(path) in line and "figures segdiff did not write" in line and "\n" not in line
