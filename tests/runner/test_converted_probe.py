"""The layer probe of converted models: LiteRT's and ONNX Runtime's own
intermediate tensors matched to the Keras model's layers in real children, every figure equal
to a direct computation from the stored tensors, layers the converter fused away listed and
left out, and each probe's final map bit for bit its plain run's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.layer_stats import compare_layer
from segdiff_gui.runner.layers import LayerProbe, LayerProbeSession
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.layers import LayerStore, comparison_key, probe_key
from segdiff_gui.storage.probe_files import CONVERTED_MATCHING
from tests.conftest import segdiff, segdiff_here
from tests.factories import run_layer_probe

pytestmark = pytest.mark.slow

CONVERTED = ("litert", "litert-int8", "onnxruntime")
# Two of the demo's images: a layer's figures are over the images run, and two calibrate int8.
IMAGES = 2


@pytest.fixture(scope="module")
def demo_probes(demo, tmp_path_factory) -> dict[str, tuple[LayerProbeSession, LayerProbe]]:
    """The demo probed under TensorFlow and each converted runtime. LiteRT's two are probed
    first, together: one child (LiteRT's conversions share one) converts, runs and probes
    both, so the sessions below find them in the cache."""
    model, images = demo
    cache = ResultCache(tmp_path_factory.mktemp("converted-layers"))
    request = MatrixRequest(model, tuple(images[:IMAGES]), cache, repeats=1)
    both = LayerProbeSession(request, RunConfig(runtime="litert"), RunConfig(runtime="litert-int8"))
    runner = both.probe_runner()
    (job,) = runner.plan.jobs
    assert {run.config.runtime for run in job.runs} == {"litert", "litert-int8"}
    messages = list(runner.run())
    assert messages[-1].failed == 0, messages
    assert all(both.store.has_probe(probe_key(run.key)) for run in both.sides)
    found = {}
    for name in CONVERTED:
        session = LayerProbeSession(request, RunConfig(), RunConfig(runtime=name))
        # Only TensorFlow's side (once) and ONNX Runtime's are probed here: LiteRT's are stored.
        left = {run.config.runtime for run in session.probe_runner().plan.runs}
        assert left == {"litert": {"tensorflow"}, "litert-int8": set()}.get(name, {name})
        found[name] = (session, run_layer_probe(session))
    return found


def _check_direct(session: LayerProbeSession, probe: LayerProbe) -> list[tuple[str, float]]:
    """Every layer's figures equal compare_layer on the stored tensors; returns each layer's
    relative error."""
    keys = [probe_key(run.key) for run in session.sides]
    errors = []
    with session.store.open_probe(keys[0]) as keras, session.store.open_probe(keys[1]) as other:
        theirs = {info.name: info for info in other.layers}
        for stats in probe.comparison.layers:
            ours = next(info for info in keras.layers if info.name == stats.name)
            expected = compare_layer(
                stats.name, keras.layer(ours.index), other.layer(theirs[stats.name].index)
            )
            assert stats == expected
            errors.append((stats.name, stats.relative_error))
    # The probe computed the converted run's final map as its plain run did, bit for bit.
    assert all(
        side["final"]["bitwise_equal"] for side in (probe.stored.reference, probe.stored.other)
    )
    return errors


@pytest.mark.parametrize("name", CONVERTED)
def test_every_demo_layer_is_matched_and_its_figures_are_direct(demo_probes, name):
    session, probe = demo_probes[name]
    names = [stats.name for stats in probe.comparison.layers]
    assert len(names) == 17 and names[0] == "enc1_1" and names[-1] == "foreground"
    assert probe.comparison.unmatched == ()
    errors = _check_direct(session, probe)
    if name in ("litert", "onnxruntime"):
        # float32 conversions: a layer matched to the wrong tensor would be far off.
        assert all(0 <= error < 1e-5 for _, error in errors), errors
    else:
        assert all(error > 1e-4 for _, error in errors), errors  # int8 from the first layer on
    # The output layer is the converted run's map: the last row is compare's of the two runs.
    cache = session.request.cache
    maps = [cache.read_run(run.key).probabilities for run in session.sides]
    last = probe.comparison.layers[-1]
    assert last.max_abs == pytest.approx(float(np.abs(maps[0] - maps[1]).max()), rel=1e-6)


def test_int8_tensors_are_dequantized_and_recorded_as_int8(demo_probes):
    session, _ = demo_probes["litert-int8"]
    with session.store.open_probe(probe_key(session.sides[1].key)) as other:
        dtypes = {info.name: info.dtype for info in other.layers}
        assert dtypes["enc1_1"] == "int8" and dtypes["foreground"] == "float32"
        assert other.layer(0).dtype == np.float32
        assert other.meta["tensors_from"] == "LiteRT full int8"


TF_TO_LITERT = ("runtime=tensorflow", "runtime=litert")


def _encoder_unet_layers(
    models, small_images, root, *sides: str, json_out: bool = True, capsys=None
):
    """``segdiff layers`` on the nested encoder U-Net, ``sides`` its --from and --to. With
    ``capsys``, its ``main`` runs in this process (its children are still real); without (a
    module's fixture), in its own."""
    more = ("--json",) if json_out else ()
    args = (
        "layers", models / "encoder_unet.keras", *small_images, "--from", sides[0],
        "--to", sides[1], "--cache", root, *more,
    )  # fmt: skip
    return segdiff_here(capsys, *args) if capsys is not None else segdiff(*args)


@pytest.fixture(scope="module")
def encoder_litert(models, small_images, tmp_path_factory) -> tuple[Path, dict]:
    """The encoder U-Net probed under TensorFlow and LiteRT, computed once: the cache (the
    tests below add to it, or copy it before they spoil it) and what the command showed."""
    root = tmp_path_factory.mktemp("encoder-litert")
    result = _encoder_unet_layers(models, small_images, root, *TF_TO_LITERT)
    assert result.returncode == 0, result.stderr
    return root, json.loads(result.stdout)


def test_layers_fused_by_the_converter_are_listed_and_left_out(
    encoder_litert, models, small_images, capsys
):
    root, shown = encoder_litert
    assert not shown["served_from_cache"]
    # Batch normalisation folded into its convolution, each convolution fused with the ReLU
    # layer after it: LiteRT has no tensor for them.
    assert shown["unmatched"] == ["encoder/conv", "encoder/norm", "decoder/conv"]
    names = [layer["name"] for layer in shown["layers"]]
    assert names == [
        "encoder/relu",
        "encoder/pool",
        "encoder/deep",
        "up",
        "join",
        "decoder/relu",
        "mask",
    ]
    assert all(layer["relative_error"] < 1e-5 for layer in shown["layers"])
    said = _encoder_unet_layers(
        models, small_images, root, *TF_TO_LITERT, json_out=False, capsys=capsys
    )
    assert said.returncode == 0, said.stderr
    text = " ".join(said.stdout.split())
    assert "3 layers could not be matched to a tensor of their own in the converted model" in text


def test_two_converted_sides_name_what_neither_could_match(
    encoder_litert, models, small_images, capsys, monkeypatch
):
    """LiteRT's run and probe are in the cache: only float16's are made, by one child, which
    computes its plain run (into the cache, as any run child would) and then probes it."""
    from segdiff_gui.runner import child

    started: list[str] = []
    engine_command = child.engine_command
    monkeypatch.setattr(
        child, "engine_command", lambda words: started.append(words) or engine_command(words)
    )
    root, _ = encoder_litert
    result = _encoder_unet_layers(
        models, small_images, root, "runtime=litert", "runtime=litert-fp16", capsys=capsys
    )
    assert result.returncode == 0, result.stderr
    assert started == ["run"]
    cache = ResultCache(root)
    labels = {cache.read_run(key).label for key in cache.keys()}
    assert "litert-fp16 cpu b1 r0" in labels, labels
    shown = json.loads(result.stdout)
    assert shown["unmatched"] == ["encoder/conv", "encoder/norm", "decoder/conv"]
    assert len(shown["layers"]) == 7


def test_layers_that_keep_kerass_default_names_are_each_matched_to_their_own_tensor(
    models, small_images, tmp_path, capsys
):
    """Twelve convolutions named conv2d … conv2d_11, as Keras names them. The
    first runs in TensorFlow's scope conv2d_1; conv2d_1, fused by LiteRT into the ReLU layer
    after it, has no tensor of its own. Each converted layer is compared with TensorFlow's
    probe of the same layer: float32 conversions, so a layer given another's tensor would be
    far off, and the difference is born where it is."""
    cache = ResultCache(tmp_path / "cache")
    shown = {}
    for runtime in ("litert", "onnxruntime"):
        result = segdiff_here(
            capsys, "layers", models / "default_names.keras", *small_images,
            "--from", "runtime=tensorflow", "--to", f"runtime={runtime}",
            "--cache", cache.root, "--json",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        shown[runtime] = json.loads(result.stdout)
    convolutions = ["conv2d", "conv2d_1", *(f"conv2d_{i}" for i in range(2, 12))]
    for runtime, fused in (("litert", ["conv2d_1"]), ("onnxruntime", [])):
        layers = {layer["name"]: layer for layer in shown[runtime]["layers"]}
        assert shown[runtime]["unmatched"] == fused, runtime
        assert set(convolutions) - set(fused) <= set(layers), runtime
        assert len(layers) == 16 - len(fused)
        errors = {name: layer["relative_error"] for name, layer in layers.items()}
        assert all(error < 1e-5 for error in errors.values()), (runtime, errors)
        # Where the difference is born depends on the CPU's kernels (oneDNN's or not): the
        # one the stored tensors say.
        first = _first_differing_tensor(cache, shown[runtime])
        assert first is not None and shown[runtime]["first_differing"] == first, runtime


def _first_differing_tensor(cache: ResultCache, shown: dict) -> str | None:
    """The first of ``shown``'s layers (a comparison's JSON) whose stored tensors differ in
    their bits between the two sides' probes."""
    store = LayerStore(cache)
    keys = (shown["reference"]["probe_key"], shown["other"]["probe_key"])
    with store.open_probe(keys[0]) as reference, store.open_probe(keys[1]) as other:
        indices = [{info.name: info.index for info in side.layers} for side in (reference, other)]
        for layer in shown["layers"]:
            a = reference.layer(indices[0][layer["name"]])
            b = other.layer(indices[1][layer["name"]])
            if not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
                return str(layer["name"])
    return None


def _shown(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _as_stored_before_whole_scopes(path, attribute, sides=()):
    """Make a stored probe's meta (or a comparison's sides) look as the matching before whole
    scopes left it: no matching recorded."""
    with h5py.File(path, "r+") as handle:
        value = json.loads(handle.attrs[attribute])
        for meta in [value[side] for side in sides] or [value]:
            meta.pop("matching", None)
        handle.attrs[attribute] = json.dumps(value)


def test_a_converted_probe_matched_before_whole_scopes_is_probed_again(
    encoder_litert, models, small_images, tmp_path, capsys
):
    """A LiteRT probe and its comparison stored before the matching by whole scopes may credit
    a layer with another's tensor: asked again, they are made again, not served."""
    root, first = encoder_litert
    cache = ResultCache(shutil.copytree(root, tmp_path / "cache"))
    store = LayerStore(cache)
    keras_probe, litert_probe = first["reference"]["probe_key"], first["other"]["probe_key"]
    _as_stored_before_whole_scopes(store.probe_path(litert_probe), "meta")
    compared = store.comparison_path(comparison_key(keras_probe, litert_probe))
    _as_stored_before_whole_scopes(compared, "sides", ("reference", "other"))
    shown = _shown(
        _encoder_unet_layers(models, small_images, cache.root, *TF_TO_LITERT, capsys=capsys)
    )
    assert not shown["served_from_cache"]
    assert shown["layers"] == first["layers"] and shown["unmatched"] == first["unmatched"]
    with store.open_probe(litert_probe) as probe:
        assert probe.meta["matching"] == CONVERTED_MATCHING
    # The Keras side, matched by nothing, was not probed again; the new comparison is served.
    with store.open_probe(keras_probe) as probe:
        assert probe.meta["wall_time_s"] == first["reference"]["wall_time_s"]
    again = _encoder_unet_layers(models, small_images, cache.root, *TF_TO_LITERT, capsys=capsys)
    assert _shown(again)["served_from_cache"]
