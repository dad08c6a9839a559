"""The layer probe on real models in real children: per-layer figures equal a
direct computation from the stored tensors, the last layer's equal ``compare``'s, the first
differing layer is the one the tensors say, nested models are flattened, and the probe's final
map is checked against the plain run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import parse_config_spec
from segdiff_gui.core.layer_stats import LayerStats, compare_layer, spatial_difference
from segdiff_gui.runner.layers import LayerProbe, LayerProbeSession
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.layers import LayerStore, probe_key
from tests.conftest import segdiff
from tests.factories import engine_script, run_layer_probe

pytestmark = pytest.mark.slow

REFERENCE = "device=cpu,batch=1"
OTHERS = ("device=cpu,batch=64", "device=cpu,xla=on", "device=cpu,precision=bf16")
# Two of the demo's images: every figure is per layer over the images run, a batch of 64 is
# filled from the set whatever its size, and each probe stays small.
IMAGES = 2


@pytest.fixture(scope="module")
def demo_probes(demo, tmp_path_factory) -> tuple[ResultCache, dict[str, LayerProbeSession]]:
    """The demo U-Net's batch 1 against batch 64, XLA and bfloat16 on two images. XLA's and
    bfloat16's probes are made first, together (they share a child's process-level settings:
    the child computes both plain runs, then probes them), so each of the three sessions below
    compares probes the cache already has, bar batch 64's and the reference's, made (with
    their plain runs) in one child."""
    model, images = demo
    cache = ResultCache(tmp_path_factory.mktemp("layers"))
    configs = tuple(parse_config_spec(s) for s in (REFERENCE, *OTHERS))
    request = MatrixRequest(model, tuple(images[:IMAGES]), cache, configs=configs, repeats=1)
    for _ in LayerProbeSession(request, configs[2], configs[3]).probe_runner().run():
        pass
    sessions = {}
    for spec in OTHERS:
        session = LayerProbeSession(request, configs[0], parse_config_spec(spec))
        sessions[spec] = session
        session.result = run_layer_probe(session)  # type: ignore[attr-defined]
    return cache, sessions


@pytest.mark.parametrize("spec", OTHERS)
def test_every_layer_figure_equals_a_direct_computation_from_the_stored_tensors(demo_probes, spec):
    cache, sessions = demo_probes
    session = sessions[spec]
    probe: LayerProbe = session.result  # type: ignore[attr-defined]
    assert probe.tensors_kept and not probe.served_from_cache
    keys = [probe_key(run.key) for run in session.sides]
    with session.store.open_probe(keys[0]) as reference, session.store.open_probe(keys[1]) as other:
        names = [info.name for info in reference.layers]
        assert names[0] == "enc1_1" and names[-1] == "foreground" and len(names) == 17
        first = None
        for info, stats in zip(reference.layers, probe.comparison.layers, strict=True):
            a, b = reference.layer(info.index), other.layer(info.index)
            expected = compare_layer(info.name, a, b)
            assert stats == expected  # one piece per layer: the same arithmetic, bit for bit
            spatial = spatial_difference(a, b)
            assert np.array_equal(probe.stored.spatial[info.index], spatial)
            if first is None and not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
                first = info.name
        # None where the CPU's kernels compute batch 64 as batch 1 (oneDNN off, AVX-512).
        found = probe.comparison.first_differing
        assert (found.name if found is not None else None) == first
    # The probe computed each side's final map as its plain run did, bit for bit …
    assert all(
        side["final"]["bitwise_equal"] for side in (probe.stored.reference, probe.stored.other)
    )
    assert probe.stored.final_source == "plain runs"
    # … so the last layer's figures are compare's for the same two runs.
    maps = [cache.read_run(run.key).probabilities for run in session.sides]
    compared = compare_maps(maps[0], maps[1], 0.5)
    last = probe.comparison.layers[-1]
    assert last.max_ulp == compared.max_ulp and last.max_abs == pytest.approx(compared.max_abs)
    assert round(last.differing_fraction * compared.pixels) == compared.differing_pixels
    assert probe.final(0.5).flips == compared.flips


def test_a_probe_asked_again_is_served_from_the_cache(demo_probes, demo):
    cache, sessions = demo_probes
    model, images = demo
    result = segdiff(
        "layers", model, *images[:IMAGES], "--cache", cache.root, "--from", REFERENCE,
        "--to", OTHERS[2], "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["first_differing"] == "enc1_1" and shown["tensors_kept"]
    assert shown["final"]["flips"] == sessions[OTHERS[2]].result.final(0.5).flips
    assert shown["served_from_cache"]  # no child ran


def _stored_figures_are_direct(cache: ResultCache, probe: dict) -> None:
    """Every layer's figures in ``probe`` (its JSON) equal compare_layer on the stored
    tensors of both sides; the first differing layer is the first whose bits differ."""
    store = LayerStore(cache)
    keys = (probe["reference"]["probe_key"], probe["other"]["probe_key"])
    with store.open_probe(keys[0]) as reference, store.open_probe(keys[1]) as other:
        first = None
        for info, shown in zip(reference.layers, probe["layers"], strict=True):
            a, b = reference.layer(info.index), other.layer(info.index)
            assert LayerStats.from_dict(shown) == compare_layer(info.name, a, b)
            if first is None and not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
                first = info.name
    assert probe["first_differing"] == first


def _softmax_layers(tmp_path, demo, other: str, *more: str):
    """``segdiff layers`` on the softmax demo's first two images, ``REFERENCE`` → ``other``."""
    from segdiff_gui.resources import demo_model

    _, images = demo
    sides = ("--from", REFERENCE, "--to", other)
    return segdiff("layers", demo_model("softmax3"), *images[:2], "--cache", tmp_path, *sides,
                   *more)  # fmt: skip


def _forget_comparisons(cache_root) -> None:
    """Remove the stored comparisons, so that the next call reads the probes again."""
    for path in (cache_root / "layers" / "compared").rglob("*.h5"):
        path.unlink()


BF16 = "device=cpu,precision=bf16"


@pytest.fixture(scope="module")
def softmax_probe(demo, tmp_path_factory) -> tuple[Path, dict]:
    """``segdiff layers`` on the softmax demo, ``REFERENCE`` → bfloat16, computed once (a
    plain child and a probe child): a cache each test below copies and may then spoil, and
    what the command showed."""
    root = tmp_path_factory.mktemp("softmax-layers")
    result = _softmax_layers(root, demo, BF16, "--json")
    assert result.returncode == 0, result.stderr
    return root, json.loads(result.stdout)


def _copy_of(softmax_probe, tmp_path) -> tuple[Path, dict]:
    """A copy of the softmax probe's cache in ``tmp_path``, and what its command showed."""
    root, shown = softmax_probe
    return Path(shutil.copytree(root, tmp_path / "cache")), shown


def test_softmax_output_counts_class_flips_and_the_budget_can_keep_no_tensors(
    softmax_probe, tmp_path, demo
):
    root, shown = _copy_of(softmax_probe, tmp_path)
    assert shown["tensors_kept"] and not shown["served_from_cache"]
    _stored_figures_are_direct(ResultCache(root), shown)
    maps = [ResultCache(root).read_run(shown[s]["run_key"]).probabilities
            for s in ("reference", "other")]  # fmt: skip
    assert shown["final"]["flips"] == compare_maps(maps[0], maps[1]).flips  # argmax flips
    # Compared again (its stored comparison lost) under a budget of nothing: the probes are
    # read once more, then removed; the figures stay.
    _forget_comparisons(root)
    again = _softmax_layers(root, demo, BF16, "--keep", "0")
    assert again.returncode == 0, again.stderr
    assert "class flips (argmax)" in again.stdout and "Layer tensors not kept" in again.stdout
    assert "The difference is born in enc1_1" in again.stdout
    last = _softmax_layers(root, demo, BF16, "--json")
    kept = json.loads(last.stdout)
    assert not kept["tensors_kept"] and kept["layers"] == shown["layers"]  # figures stayed
    assert not list((root / "layers" / "tensors").rglob("*.h5"))


def test_a_nested_encoder_and_a_sequential_block_are_flattened(
    models, small_images, tmp_path, engine_starts
):
    """A fresh probe of two sides that share a process's settings starts one child: it
    computes both plain runs (into the cache, as any run child would), then probes them."""
    request = MatrixRequest(
        models / "encoder_unet.keras", tuple(small_images), ResultCache(tmp_path), repeats=1
    )
    session = LayerProbeSession(
        request,
        parse_config_spec(REFERENCE),
        parse_config_spec("device=cpu,batch=4,precision=bf16"),
    )
    probe = run_layer_probe(session)
    assert engine_starts == ["run"]
    assert all(request.cache.read_run(run.key).provenance.device for run in session.sides)
    names = [layer.name for layer in probe.comparison.layers]
    assert names == [
        "encoder/conv", "encoder/norm", "encoder/relu", "encoder/pool", "encoder/deep",
        "up", "join", "decoder/conv", "decoder/relu", "mask",
    ]  # fmt: skip
    with session.store.open_probe(probe_key(session.sides[1].key)) as other:
        assert other.layers[1].dtype == "bfloat16" and other.layers[1].batch_shape[0] == 4
        assert other.layers[1].shape == (32, 32, 4)
    assert probe.comparison.first_differing.name == "encoder/conv"
    _stored_figures_are_direct(request.cache, probe.to_dict())
    assert all(
        side["final"]["bitwise_equal"] for side in (probe.stored.reference, probe.stored.other)
    )


def test_a_subclassed_model_gets_one_line_saying_what_can_be_probed():
    seen = engine_script(
        """
        import json, keras
        from segdiff_gui.core.errors import InputError
        from segdiff_gui.engine.layer_capture import tappable_graph

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.conv = keras.layers.Conv2D(1, 1)
            def call(self, x):
                return self.conv(x)

        try:
            tappable_graph(Net(), "net.keras")
        except InputError as error:
            print(json.dumps(str(error)))
        """
    )
    assert "subclassed Keras model (Net)" in seen and "functional or Sequential" in seen


def test_under_jax_each_layer_is_its_own_xla_computation_and_the_output_holds(
    models, small_images, tmp_path
):
    """XLA's jit per layer under JAX (a layer's stateless call, which hands every keyword to
    call(): a Conv2D takes no ``training``) computes the whole model's map bit for bit here."""
    request = MatrixRequest(
        models / "encoder_unet.keras", tuple(small_images), ResultCache(tmp_path), repeats=1
    )
    session = LayerProbeSession(
        request, parse_config_spec("runtime=jax"), parse_config_spec("runtime=jax,xla=on")
    )
    probe = run_layer_probe(session)
    assert len(probe.comparison.layers) == 10
    assert all(
        side["final"]["bitwise_equal"] for side in (probe.stored.reference, probe.stored.other)
    )


def test_a_probe_found_damaged_while_compared_is_removed_and_probed_again(
    softmax_probe, tmp_path, demo
):
    """A damaged probe failed every call. Found damaged while the
    comparison reads it, it is removed and said in one line; the next call probes again."""
    root, shown = _copy_of(softmax_probe, tmp_path)
    _forget_comparisons(root)
    damaged = LayerStore(ResultCache(root)).probe_path(probe_key(shown["other"]["run_key"]))
    with h5py.File(damaged, "r+") as handle:  # one value of the first layer changed
        piece = handle["layers/00000/p00000"]
        piece[(0,) * piece.ndim] += 1.0
    second = _softmax_layers(root, demo, BF16)
    assert second.returncode == 2
    (line,) = second.stderr.strip().splitlines()[-1:]
    assert str(damaged) in line and "removed, it is probed again on the next run" in line
    assert not damaged.exists()
    third = _softmax_layers(root, demo, BF16, "--json")
    assert third.returncode == 0, third.stderr
    assert damaged.exists()
    assert json.loads(third.stdout)["layers"] == shown["layers"]  # the same figures again
