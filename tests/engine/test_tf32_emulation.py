"""Emulated TF32 (emulate=tf32) in real children: its TensorFlow rounding equals
core/tf32's bit for bit, it rounds the ops a GPU's tensor cores compute and leaves depthwise
convolutions alone, and on the demo it moves the map far more than batch or XLA do."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import parse_config_spec
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.tf32 import to_tf32
from segdiff_gui.runner import plan_matrix
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here
from tests.engine.demo_runs import TF32, module_runs

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("tf32_emulation_child.py")
TOOLS = Path(__file__).parents[2] / "tools"


def _patterns() -> np.ndarray:
    """Crafted float32 patterns (ties, subnormals, the top of the range, infinities, NaNs)
    and 200,000 random ones over every sign and exponent."""
    crafted = [
        0x3F801000, 0x3F803000, 0xBF801000, 0x3FFFF000, 0x3F800FFF, 0x00001000, 0x80001000,
        0x007FF000, 0x00000FFF, 0x7F7FEFFF, 0x7F7FF000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000000,
        0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x7FA02000, 0xFFC01234,
    ]  # fmt: skip
    rng = np.random.default_rng(7)
    random = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([np.array(crafted, dtype=np.uint32), random])


RUNTIMES_HERE = [name for name in ("tensorflow", "jax", "torch") if RUNTIMES[name].installed()]


@pytest.fixture(scope="module", params=RUNTIMES_HERE)
def child_results(
    request, models, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, np.ndarray]:
    """The child's answers under one runtime (TensorFlow, JAX, PyTorch: each installed one);
    TensorFlow's say too how its backend refuses to emulate a SavedModel."""
    folder = tmp_path_factory.mktemp(f"tf32_{request.param}")
    bits = _patterns()
    np.save(folder / "bits.npy", bits)
    saved_model = [str(models / "tiny_savedmodel")] if request.param == "tensorflow" else []
    done = subprocess.run(
        [
            sys.executable,
            str(CHILD),
            request.param,
            str(folder / "bits.npy"),
            str(folder / "out.npz"),
            *saved_model,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(folder / "out.npz") as results:
        answers = {name: results[name] for name in results.files}
        return {"bits": bits, "runtime": np.array(request.param), **answers}


def test_the_runtimes_rounding_equals_core_tf32_bit_for_bit(child_results):
    """Eagerly and compiled (TensorFlow's graph and XLA, jax.jit): every pattern."""
    expected = to_tf32(child_results["bits"].view(np.float32)).view(np.uint32)
    answers = ("bits", "runtime", "layer_names", "layer_checks", "saved_model_refusal")
    ways = [name for name in child_results if name not in answers]
    assert ways and "eager" in ways
    for how in ways:
        got = child_results[how]
        wrong = np.flatnonzero(got != expected)
        assert not len(wrong), (how, [
            f"{child_results['bits'][i]:#010x} → {got[i]:#010x}, not {expected[i]:#010x}"
            for i in wrong[:5]
        ])  # fmt: skip


def test_the_ops_of_tensor_cores_are_rounded_and_depthwise_left_alone(child_results):
    """Eagerly, and compiled with XLA (TensorFlow) or jax.jit (JAX): there, a convolution and
    a matrix multiply traced under the emulation equal the compiled op on operands rounded
    beforehand, bit for bit (XLA neither drops nor moves the rounding)."""
    checks = dict(zip(child_results["layer_names"], child_results["layer_checks"], strict=True))
    compiled = [name for name in checks if name.endswith("when compiled")]
    assert len(compiled) == (0 if str(child_results["runtime"]) == "torch" else 2), checks
    assert len(checks) == 13 + len(compiled) and all(checks.values()), checks


SPECS = TF32  # tests/engine/demo_runs.py: computed there with the runtimes' and exact runs


@pytest.fixture(scope="module")
def demo_folder(demo_runtime_runs, tmp_path_factory):
    """A cache of the specs' runs alone, computed by the real ``segdiff run`` with the
    runtimes' and exact tests' runs (tests/engine/demo_runs.py), one repeat each."""
    root = tmp_path_factory.mktemp("emulated") / "cache"
    _, entries = module_runs(demo_runtime_runs, root, SPECS)
    assert all(entry["status"] == "finished" for entry in entries.values()), entries
    return root


@pytest.fixture(scope="module")
def demo_runs(demo, demo_folder):
    """The demo's first image (the second fills batch 2), one repeat each, by name: a
    run-time knob, the emulation is computed in its runtime's plain runs' child."""
    model, images = demo
    cache = ResultCache(demo_folder)
    configs = {name: parse_config_spec(spec) for name, spec in SPECS.items()}
    plan = plan_matrix(model, images[:2], list(configs.values()), cache=cache, repeats=1)
    assert not plan.jobs  # every run is the module's, served from its cache
    names = {config: name for name, config in configs.items()}
    runs = {names[run.config]: cache.read_run(run.key) for run in plan.runs}
    children = {
        runtime: {runs[name].provenance.to_dict()["process_id"] for name in SPECS
                  if runs[name].provenance.to_dict()["runtime"] == runtime}
        for runtime in ("tensorflow", "jax", "torch")
    }  # fmt: skip
    assert all(len(ids) == 1 for ids in children.values()), children  # one child each
    assert len(set.union(*children.values())) == 3, children
    return runs


def test_on_the_demo_the_emulation_moves_the_map_far_more_than_batch_or_xla(demo_runs):
    """The prediction is an emulated run against the float32 run of the same batch and XLA
    (core/predictions.py): with XLA and a batch of two it is what it is alone, far beyond what
    batch and XLA move a float32 map.

    Two emulated runs of other batches or XLA can differ from each other far more than two
    float32 runs do (132,749 ULP where the float32 runs differ by 75, on a CPU whose
    oneDNN kernels sum the decoder's convolutions in another order than XLA's): TF32 rounds
    every layer's input, and a value one float32 ULP away in another summation order can
    round to a TF32 value 8,192 ULP away, which the next layers carry (on a GPU with TF32 on
    too). That is not a rewrite of the rounding under XLA: each op rounds as without it
    (test_the_ops_of_tensor_cores_are_rounded_and_depthwise_left_alone)."""
    base = demo_runs["base"].probabilities
    figures = {
        name: compare_maps(base, demo_runs[name].probabilities, cutoff=0.5)
        for name in ("b2", "xla", "b2_xla", "emulated")
    }
    figures["emulated with b2 and xla"] = compare_maps(
        demo_runs["b2_xla"].probabilities, demo_runs["emulated_b2_xla"].probabilities, cutoff=0.5
    )
    figures["emulated runs between them"] = compare_maps(
        demo_runs["emulated"].probabilities, demo_runs["emulated_b2_xla"].probabilities, cutoff=0.5
    )
    for name, figure in figures.items():
        print(
            f"{name}: max |Δ| {figure.max_abs:.3g}, max ULP {figure.max_ulp:,}, "
            f"{figure.differing_pixels:,} pixels differ, {figure.flips} flips at 0.5"
        )
    others = max(figures[name].max_abs for name in ("b2", "xla", "b2_xla"))
    alone, composed = figures["emulated"], figures["emulated with b2 and xla"]
    for prediction in (alone, composed):
        # Measured on a CPU with AVX-512 BF16, oneDNN on and off: 0.00115 against at most
        # 4.2e-07 (about 2,800 times).
        assert prediction.max_abs >= 100 * others, figures
        assert prediction.max_ulp >= 1 << 13, figures  # a TF32 step at least (8,192 ULP)
        assert prediction.flips >= 1, figures
    assert alone.max_abs / 2 <= composed.max_abs <= 2 * alone.max_abs, figures


def test_under_jax_and_pytorch_the_emulation_predicts_as_under_tensorflow(demo_runs):
    """The same rounding in each runtime's ops: the emulation moves each runtime's map as
    much as TensorFlow's, and far more than the runtimes differ from one another."""
    base = demo_runs["base"].probabilities
    tensorflow = compare_maps(base, demo_runs["emulated"].probabilities, cutoff=0.5)
    for runtime in ("jax", "jax emulated eager", "torch"):
        plain = demo_runs[runtime.split()[0]].probabilities
        emulated = demo_runs[f"{runtime} emulated" if " " not in runtime else runtime]
        figure = compare_maps(plain, emulated.probabilities, cutoff=0.5)
        between = compare_maps(base, plain, cutoff=0.5)
        print(
            f"{runtime}: max |Δ| {figure.max_abs:.3g}, max ULP {figure.max_ulp:,}, "
            f"{figure.flips} flips; the runtime against TensorFlow: {between.max_abs:.3g}"
        )
        assert tensorflow.max_abs / 2 <= figure.max_abs <= tensorflow.max_abs * 2, figure
        assert figure.max_abs >= 100 * between.max_abs


def test_the_emulated_run_says_what_it_rounded(demo_runs):
    for name in ("emulated", "emulated_b2_xla", "jax emulated", "jax emulated eager"):
        record = demo_runs[name]
        said = record.provenance.to_dict()["emulation"]
        assert said.startswith("TF32 emulated on this CPU (round to nearest, ties away"), said
        assert said.endswith(": 11 convolutions rounded"), said  # the demo U-Net's eleven
        assert "emu-tf32" in record.label and record.config["emulate"] == "tf32"
    # PyTorch runs eagerly: its ops are counted at every call (one call here)
    torch = demo_runs["torch emulated"].provenance.to_dict()["emulation"]
    assert torch.endswith(": 11 convolutions rounded"), torch
    assert "emulation" not in demo_runs["base"].provenance.to_dict()


def test_the_gpu_checks_comparison_prints_the_prediction_and_says_no_gpu_was_here(
    demo_runs, demo_folder
):
    """tools/tf32_check.py, the last step of tools/gpu_check.sh, on a CPU's runs: the
    prediction's figures, and that nothing was measured."""
    cache = demo_folder
    done = subprocess.run(
        [sys.executable, str(TOOLS / "tf32_check.py"), str(cache)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = {line.split(")")[0] + ")": line.split()[-4:] for line in lines[1:4]}
    expected = {}
    for runtime, plain, emulated in (
        ("jax", "jax", "jax emulated"),
        ("tensorflow", "base", "emulated"),
        ("torch", "torch", "torch emulated"),
    ):  # each figure recomputed here from the runs the tool read
        figure = compare_maps(
            demo_runs[plain].probabilities, demo_runs[emulated].probabilities, cutoff=0.5
        )
        expected[f"predicted: emulated TF32 vs float32 (cpu, {runtime})"] = [
            f"{figure.differing_pixels:,}", f"{figure.max_ulp:,}", f"{figure.max_abs:.3g}",
            f"{figure.flips:,}",
        ]  # fmt: skip
        assert figure.flips >= 1 and figure.max_ulp >= 1 << 13, (runtime, figure)
    assert rows == expected, lines
    assert lines[4:] == ["measured: no GPU run here (a dry run on the CPU): the prediction alone"]


def test_the_gpu_check_script_parses_and_has_its_dry_run():
    script = TOOLS / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    assert "nvidia-smi -L" in text and "emulate=tf32" in text and "tf32_check.py" in text


def test_the_tensorflow_backend_refuses_to_emulate_a_savedmodel_too(child_results):
    """Where planning was passed by, the backend refuses in the runner's words (a SavedModel
    loads under TensorFlow only: the other runtimes' children are not asked)."""
    refused = child_results.get("saved_model_refusal")
    if refused is None:
        assert str(child_results["runtime"]) != "tensorflow"
        return
    said = str(refused)
    assert "tiny_savedmodel" in said and "emulate=tf32 rounds a Keras model's convolutions" in said


def test_a_savedmodel_refuses_the_emulation_in_one_line(
    models, small_images, cache, capsys, fake_engine
):
    """A SavedModel's graph calls TensorFlow's kernels itself: no Keras op to round. Said
    when the runs are planned, before any child starts (the fake engine, which would compute
    the run, is never asked)."""
    result = segdiff_here(
        capsys, "run", models / "tiny_savedmodel", small_images[0], "--trust-model",
        "--config", "emulate=tf32", "--cache", cache.root, "--repeats", "1",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "tiny_savedmodel" in line and "emulate=tf32 rounds a Keras model's convolutions" in line
    assert not cache.keys()


def test_the_layer_probe_emulates_as_the_forward_pass_does(
    demo, demo_runs, demo_folder, tmp_path, capsys
):
    """A probe of an emulated run rounds each layer as its forward pass did: its final map
    equals the plain run's bit for bit (the probe checks), and the emulation's difference is
    born in the first convolution. The plain runs are the module's (a copy of its cache):
    only the probes' child starts."""
    model, images = demo
    cache = shutil.copytree(demo_folder, tmp_path / "cache")
    runs = ResultCache(cache).keys()
    result = segdiff_here(
        capsys, "layers", "--from", "batch=1", "--to", "emulate=tf32", model, images[0],
        "--cache", cache, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ResultCache(cache).keys() == runs  # both plain runs were the module's
    comparison = json.loads(result.stdout)
    assert comparison["other"]["final"]["bitwise_equal"], comparison["other"]
    assert comparison["first_differing"] == "enc1_1"
    # The probe's final maps are the runs' (checked above): its figures are theirs.
    final = compare_maps(
        demo_runs["base"].probabilities, demo_runs["emulated"].probabilities, cutoff=0.5
    )
    assert comparison["final"]["flips"] == final.flips >= 1
    assert comparison["final"]["max_ulp"] == final.max_ulp
