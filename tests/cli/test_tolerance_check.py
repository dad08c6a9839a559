"""``segdiff check --atol --rtol --error-quantile``: Polygraphy's tolerances, per
output. Each output a model's runs stored is a group of its own (its key holds the output
chosen), so a tolerance named for an output gates that group. Every pass or fail is
recomputed here with numpy from the maps as the cache stores them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from segdiff_gui import api
from segdiff_gui.core.config import RunConfig
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here
from tests.factories import make_record, sealed

# Two outputs of one model, chosen by index; the model names them "probs" and "edges".
OUTPUTS = {"0": "probs", "1": "edges"}


@pytest.fixture
def two_outputs(tmp_path) -> ResultCache:
    """Each output's reference (cpu b1) and two runs off it: batch 64 by float32 rounding
    noise, bfloat16 by bfloat16's."""
    cache = ResultCache(tmp_path / "cache")
    rng = np.random.default_rng(49)
    for index, name in OUTPUTS.items():
        reference = rng.random((32, 24), dtype=np.float32)
        reference[0] = 0.0  # a row the relative error divides by 0
        noise = {"cpu b64 r0": 3e-7, "cpu b1 bf16 r0": 4e-3}
        runs = {"cpu b1 r0": reference}
        for label, scale in noise.items():
            runs[label] = (reference + rng.standard_normal(reference.shape) * scale).astype(
                np.float32
            )
        for label, values in runs.items():
            record = make_record(
                "m", values, label, output={"output": index, "activation": "none"},
                output_name=name,
            )  # fmt: skip
            if "bf16" in label:  # make_record knows device and batch only
                record = sealed(record, config=RunConfig(precision="mixed_bfloat16").to_dict())
            cache.write_run(record)
    return cache


def stored_maps(cache: ResultCache) -> dict[tuple[str, str], np.ndarray]:
    """Each map as stored, by (output index, label)."""
    maps = {}
    for key in cache.keys():
        record = cache.read_run(key)
        maps[(record.output["output"], record.label)] = record.probabilities
    return maps


def output_of(run: dict[str, object]) -> str:
    """The output (its index) of a run in ``check --json``, from its group's title."""
    (index,) = [i for i in OUTPUTS if str(run["title"]).endswith(f"(output {i})")]
    return index


def errors(reference: np.ndarray, run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|Δ| and |Δ|/|reference| as Polygraphy makes them: a reference of 0 taken as float64's
    epsilon (finite maps)."""
    wide = reference.astype(np.float64)
    delta = np.abs(run.astype(np.float64) - wide)
    return delta, delta / np.where(wide == 0, np.finfo(np.float64).eps, np.abs(wide))


def exceeding(reference: np.ndarray, run: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Polygraphy's elemwise rule: |Δ| > atol and |Δ|/|reference| > rtol."""
    delta, relative = errors(reference, run)
    return (delta > atol) & (relative > rtol)


@pytest.mark.parametrize(
    "given",
    [
        {"atol": 1e-6, "rtol": 0.0},
        {"atol": 1e-2, "rtol": 0.0},
        {"atol": 0.0, "rtol": 1e-3},
        {"atol": 1e-6, "rtol": 1e-5},
        {"atol": 0.1, "rtol": 0.0},
    ],
)
def test_check_fails_where_a_value_exceeds_both_tolerances(two_outputs, capsys, given):
    atol, rtol = given["atol"], given["rtol"]
    result = segdiff_here(capsys, "check", "--cache", two_outputs.root, "--atol", atol,
                          "--rtol", rtol, "--json")  # fmt: skip
    report = json.loads(result.stdout)
    maps = stored_maps(two_outputs)
    runs = report["tolerances"]["runs"]
    assert len(runs) == 4  # two runs of each output against its reference
    failing = 0
    for run in runs:
        index = output_of(run)
        over = exceeding(maps[(index, "cpu b1 r0")], maps[(index, run["label"])], atol, rtol)
        assert run["exceeding"] == int(over.sum()) and run["values"] == over.size
        assert run["passed"] == (not over.any())
        failing += not run["passed"]
    assert result.returncode == (1 if failing else 0)
    assert len(report["failures"]) == failing


def test_per_output_tolerances_gate_each_output_and_say_how_many_values_exceed(two_outputs, capsys):
    maps = stored_maps(two_outputs)
    # edges (output 1) gets a loose atol by its name; probs keeps the default.
    loose = float(errors(maps[("1", "cpu b1 r0")], maps[("1", "cpu b1 bf16 r0")])[0].max())
    args = ["check", "--cache", two_outputs.root, "--atol", 1e-6, f"edges:{loose}"]
    result = segdiff_here(capsys, *args)
    expected = {}
    for index, name in OUTPUTS.items():
        atol = loose if name == "edges" else 1e-6
        for label in ("cpu b64 r0", "cpu b1 bf16 r0"):
            over = exceeding(maps[(index, "cpu b1 r0")], maps[(index, label)], atol, 0.0)
            expected[(name, label)] = int(over.sum())
    assert expected[("edges", "cpu b1 bf16 r0")] == 0  # its own bound is its largest |Δ|
    failing = {key: count for key, count in expected.items() if count}
    assert failing and result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    assert len(lines) == len(failing)
    for (name, label), count in failing.items():
        assert any(
            line.startswith(f"FAIL {label} (m.keras on t.png (output ")
            and f"|Δ| > atol 1e-06 at {count:,} of {32 * 24:,} values" in line
            and line.endswith("against cpu b1 r0")
            for line in lines
        ), (name, label, lines)
    assert "checked against atol 1e-06 (edges: " in result.stdout
    # The same output named by what --output chose ("1") is the same group.
    by_index = segdiff_here(capsys, "check", "--cache", two_outputs.root, "--atol", 1e-6,
                            f"1:{loose}", "--json")  # fmt: skip
    named = segdiff_here(capsys, *args, "--json")
    assert json.loads(by_index.stdout)["failures"] == json.loads(named.stdout)["failures"]


@pytest.mark.parametrize("quantile", [0.5, 0.9, 0.999])
def test_a_quantile_of_the_errors_is_checked_in_place_of_every_value(two_outputs, capsys, quantile):
    maps = stored_maps(two_outputs)
    atol, rtol = 1e-3, 1e-2
    result = segdiff_here(capsys, "check", "--cache", two_outputs.root, "--atol", atol,
                          "--rtol", rtol, "--error-quantile", quantile, "--json")  # fmt: skip
    runs = json.loads(result.stdout)["tolerances"]["runs"]
    failing = 0
    for index in OUTPUTS:
        for label in ("cpu b64 r0", "cpu b1 bf16 r0"):
            delta, relative = errors(maps[(index, "cpu b1 r0")], maps[(index, label)])
            q_abs, q_rel = np.quantile(delta, quantile), np.quantile(relative, quantile)
            passed = not (q_abs > atol and q_rel > rtol)
            failing += not passed
            (run,) = [r for r in runs if r["label"] == label and output_of(r) == index]
            assert run["quantile_abs"] == q_abs
            assert run["passed"] == passed and run["quantile"] == quantile
    assert result.returncode == (1 if failing else 0)


def test_a_tolerance_for_an_output_no_run_has_is_one_line(two_outputs, capsys):
    result = segdiff_here(capsys, "check", "--cache", two_outputs.root, "--atol", "mask:1e-3")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().startswith("segdiff: check: no run checked is of output mask")
    assert "(outputs here: 0, 1, edges, probs)" in result.stderr
    bad = segdiff_here(capsys, "check", "--cache", two_outputs.root, "--rtol", "probs:-1")
    assert bad.returncode == 2 and "argument --rtol: 'probs:-1'" in bad.stderr


def test_the_api_gives_each_study_the_figures_check_gives(two_outputs, capsys):
    report = segdiff_here(capsys, "check", "--cache", two_outputs.root, "--atol", 1e-5,
                          "--rtol", 1e-4, "--json")  # fmt: skip
    runs = json.loads(report.stdout)["tolerances"]["runs"]
    studies = api.open_cache(two_outputs.root).studies
    assert len(studies) == 2  # one per output
    for study in studies:
        within = study.tolerance(atol=1e-5, rtol=1e-4)
        assert within.to_dict()["runs"] == [r for r in runs if r["group"] == study.group]
        assert within.passed == all(r["passed"] for r in within.to_dict()["runs"])
        assert [f for f in json.loads(report.stdout)["failures"] if study.title in f] == (
            within.failures
        )
    edges = next(s for s in studies if "output 1" in s.title)
    assert edges.tolerance(atol={"edges": 1.0, "probs": 0.0}).passed
    with pytest.raises(api.InputError, match="no tolerance given for its output"):
        edges.tolerance(atol={"probs": 1e-3})
