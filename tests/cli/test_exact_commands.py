"""compare and check show the exact (float64) run beside the reference: the command line's
own ``main`` in this process, on a study built in memory (until a cache holds a float64 run,
helper E's part, its studies are handed to the commands where they read the cache)."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import numpy as np
import pytest

from segdiff_gui import api
from segdiff_gui.cli.commands import check, compare, diagnose, report
from segdiff_gui.core.exact import exact_error
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.resources import demo_images, demo_model
from segdiff_gui.runner.reports import ReportContext, comparison_summary
from segdiff_gui.storage import ResultCache
from segdiff_gui.storage.loading import GroupStudy
from tests.conftest import segdiff_here
from tests.exact_runs import assert_exact_pixels, bf16_study


@pytest.fixture
def studied(monkeypatch: pytest.MonkeyPatch):
    """The commands' studies are the ones a test puts here."""
    chosen: list[GroupAnalysis] = []

    def studies_of(args):
        record = SimpleNamespace(
            target_name="cell.png", model_name="m.keras", study_model_name="m.keras"
        )
        return None, [GroupStudy(s, record, "m.keras on cell.png") for s in chosen], "c", []

    for command in (check, compare, diagnose, report):
        monkeypatch.setattr(command, "studies_of", studies_of)
    return chosen


def test_compare_has_a_column_against_the_exact_run_and_says_which_side_is_right(
    studied, capsys, tmp_path
):
    studied.append(bf16_study())
    result = segdiff_here(capsys, "compare", "--cache", tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "vs exact" in text and "≤1 ULP" in text and "3 wrong (1 undecidable)" not in text
    assert "4 wrong (1 undecidable)" in text  # bf16's row
    assert "Exact: fp64 r0, the model in float64 (beside the reference" in text
    assert "cpu r0 against the exact float64 map: max |Δ|" in text
    assert (
        "At cutoff 0.5 cpu r0 and bf16 r0 disagree on 3 pixels; the exact class agrees with "
        "cpu r0 at 3 and with bf16 r0 at 0" in " ".join(text.split())
    )
    # The exact run is no row: every run is against the reference, cpu r0.
    assert "every run against cpu r0" in text and "fp64 r0 │" not in text
    assert "m.keras on cell.png: 2 runs and the exact run fp64 r0" in text


def test_diagnose_says_which_answer_is_right(studied, capsys, tmp_path):
    studied.append(bf16_study())
    result = segdiff_here(capsys, "diagnose", "--cache", tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    heading = lines.index("Which answer is right?")
    assert lines[heading + 1].startswith("  • cpu r0 against the exact float64 map")
    assert "  • cpu r0 is right at every pixel float32 can decide." in lines
    assert any(line.startswith("  • bf16 r0 is wrong at 3 pixels at cutoff 0.5") for line in lines)


def test_check_bounds_wrong_classes_against_the_exact_run(studied, capsys, tmp_path):
    studied.append(bf16_study())
    failed = segdiff_here(
        capsys, "check", "--cache", tmp_path, "--max-wrong", "0", "--max-flips", "100"
    )
    assert failed.returncode == 1
    assert failed.stdout.splitlines()[0] == (
        "FAIL bf16 r0 (m.keras on cell.png): wrong classes 3 > 0 against the exact run fp64 r0 "
        "at cutoff 0.5 (1 more within 1 float32 ULP, not counted)"
    )
    # cpu r0 is wrong only where float32 cannot decide: it passes; both runs were checked.
    assert "FAIL cpu r0" not in failed.stdout
    assert (
        "2 runs checked against flips ≤ 100, wrong vs exact ≤ 0 (and no NaN where the reference"
        in (failed.stdout)
    )
    passed = segdiff_here(capsys, "check", "--cache", tmp_path, "--max-wrong", "3", "--json")
    assert passed.returncode == 0, passed.stdout
    assert json.loads(passed.stdout)["bounds"]["wrong_vs_exact"] == 3


def test_check_fails_where_no_exact_run_can_count_wrong_classes(studied, capsys, tmp_path):
    exact_less = bf16_study()
    studied.append(GroupAnalysis(exact_less.runs, exact_less.cutoff))
    result = segdiff_here(capsys, "check", "--cache", tmp_path, "--max-wrong", "0")
    assert result.returncode == 1
    assert (
        "FAIL cpu r0 (m.keras on cell.png): no exact run to count wrong classes against; run "
        "precision=float64 (the model in float64) for this image" in result.stdout
    )


def test_compare_json_gives_the_exact_run_beside_the_reference():
    context = ReportContext("m.keras", "cell.png", "g", {}, {})
    data = comparison_summary(bf16_study(), context).to_dict()
    assert data["reference"] == "cpu r0"
    assert [row["label"] for row in data["comparisons"]] == ["bf16 r0"]
    exact = data["exact"]
    assert exact["run"] == "fp64 r0" and exact["ulp_at_cutoff"] == 2.0**-24
    assert [(e["label"], e["decided_wrong"]) for e in exact["errors"]] == [
        ("cpu r0", 0),
        ("bf16 r0", 3),
    ]
    (sides,) = exact["flips"]
    assert (sides["first_right"], sides["second_right"], sides["flips"]) == (3, 0, 3)
    assert json.loads(json.dumps(exact)) == exact
    without = GroupAnalysis(bf16_study().runs, 0.5)
    assert "exact" not in comparison_summary(without, context).to_dict()


def test_a_cached_exact_run_stands_beside_the_reference_in_compare_and_check(exact_cache, capsys):
    result = segdiff_here(capsys, "compare", "--cache", exact_cache, "--json")
    assert result.returncode == 0, result.stderr
    (study,) = json.loads(result.stdout)
    assert study["reference"] == "cpu b1 r0"
    assert [row["label"] for row in study["comparisons"]] == ["cpu b1 bf16 r0"]
    exact = study["exact"]
    assert exact["run"] == "cpu b1 fp64 r0"
    # What the command says is what core says of the maps as stored, the exact one float64.
    maps = {
        r.label: r.probabilities for r in map(ResultCache(exact_cache).read_run, _keys(exact_cache))
    }
    assert maps["cpu b1 fp64 r0"].dtype == np.float64
    for error in exact["errors"]:
        expected = exact_error(maps["cpu b1 fp64 r0"], maps[error["label"]], 0.5, error["label"])
        assert error == json.loads(json.dumps(expected.to_dict()))
    (sides,) = exact["flips"]
    assert sides["flips"] == study["comparisons"][0]["flips"]
    bf16 = exact["errors"][1]
    strict = segdiff_here(capsys, "check", "--cache", exact_cache, "--max-wrong", "0")
    failing = [e for e in exact["errors"] if e["decided_wrong"]]
    assert strict.returncode == (1 if failing else 0)
    for error in failing:
        assert f"FAIL {error['label']} (unet_sigmoid.keras on cell_00.png): wrong classes" in (
            strict.stdout
        )
    most = max(e["decided_wrong"] for e in exact["errors"])
    loose = segdiff_here(capsys, "check", "--cache", exact_cache, "--max-wrong", str(most))
    assert loose.returncode == 0 and loose.stdout.startswith("OK: 2 runs checked")
    assert bf16["max_ulp"] > 1000  # bfloat16 against the exact map, in float32 steps


def _keys(cache) -> list[str]:
    return [record.key for record in ResultCache(cache).records()]


def test_the_exact_run_reaches_diagnose_and_the_report(exact_cache, tmp_path, capsys):
    diagnosis = segdiff_here(capsys, "diagnose", "--cache", exact_cache)
    assert "Which answer is right?" in diagnosis.stdout
    assert "  • cpu b1 r0 against the exact float64 map: max |Δ|" in diagnosis.stdout
    html = tmp_path / "r.html"
    report = segdiff_here(capsys, "report", "--cache", exact_cache, "--html", html)
    assert report.returncode == 0, report.stderr
    text = html.read_text()
    assert "Against the exact run <b>cpu b1 fp64 r0</b>" in text and "cpu b1 fp64 r0" in text


def test_a_damaged_exact_map_is_one_line_and_the_runs_are_still_compared(exact_cache, capsys):
    import h5py

    cache = ResultCache(exact_cache)
    (exact,) = [r for r in cache.records() if r.run_config.is_exact]
    with h5py.File(cache.run_path(exact.key), "r+") as handle:
        handle["probabilities"][0, 0] += 0.25  # its checksum no longer holds
    result = segdiff_here(capsys, "compare", "--cache", exact_cache, "--json")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert exact.key[:16] in line and "Traceback" not in result.stderr
    (study,) = json.loads(result.stdout)
    assert "exact" not in study and [r["label"] for r in study["comparisons"]] == ["cpu b1 bf16 r0"]
    gate = segdiff_here(capsys, "check", "--cache", exact_cache, "--max-wrong", "0")
    assert gate.returncode == 2 and "no exact run to count wrong classes against" in gate.stdout


@pytest.mark.slow
def test_on_the_demo_the_exact_run_says_bfloat16_is_the_wrong_side(demo, tmp_path, capsys):
    """Real TensorFlow children: the demo's float32 run, its bfloat16 run and the exact run.
    At every flip between them float32 decides, the exact class is the float32 run's."""
    model, images = demo
    cache = tmp_path / "demo-exact"
    result = segdiff_here(
        capsys, "run", model, *images, "--cache", cache, "--repeats", "1",
        "--config", "batch=1", "--config", "batch=1,precision=mixed_bfloat16",
        "--config", "batch=1,precision=float64",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (study,) = json.loads(segdiff_here(capsys, "compare", "--cache", cache, "--json").stdout)
    exact = study["exact"]
    reference, bf16 = exact["errors"]
    assert reference["label"] == "cpu b1 r0" and reference["decided_wrong"] == 0
    assert reference["max_abs"] < 1e-6  # float32 against float64: a few float32 steps
    (sides,) = exact["flips"]
    assert sides["flips"] > 0 and sides["first_right"] == sides["flips"] - sides["undecidable"]
    # The reference is right wherever float32 decides, so bfloat16 is wrong exactly there.
    assert bf16["decided_wrong"] == sides["flips"] - sides["undecidable"] > 0


@pytest.mark.slow
def test_on_the_demos_softmax_model_a_bfloat16_tie_is_wrong_everywhere_it_is_counted(
    tmp_path, capsys
):
    """Real TensorFlow children: the demo's three-class model in float32, in bfloat16 and in
    float64. bfloat16 rounds some pixels' top classes to one value: argmax takes the lowest
    class there, which is no decision. Wherever the exact map decides the pixel, such a tie
    is wrong, in compare's JSON, the API, the sentence and the gate; the figures are counted
    here from the stored maps, independently of segdiff's analysis."""
    model, image = demo_model("softmax3"), demo_images()[0]
    cache = tmp_path / "softmax-exact"
    result = segdiff_here(
        capsys, "run", model, image, "--cache", cache, "--repeats", "1",
        "--config", "batch=1", "--config", "batch=1,precision=mixed_bfloat16",
        "--config", "batch=1,precision=float64",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    stored = ResultCache(cache)
    maps = {r.label: r.probabilities for r in map(stored.read_run, stored.keys())}
    exact, bf16 = maps["cpu b1 fp64 r0"], maps["cpu b1 bf16 r0"]
    assert exact.dtype == np.float64 and bf16.dtype == np.float32 and bf16.shape[-1] == 3
    # Counted independently: the exact map decides a pixel unless its top classes are equal.
    exact_top = np.sort(exact, axis=-1)
    decides = exact_top[..., -1] != exact_top[..., -2]
    bf16_top = np.sort(bf16, axis=-1)
    tied = (bf16_top[..., -1] == bf16_top[..., -2]) & decides
    argmax_wrong = (bf16.argmax(-1) != exact.argmax(-1)) & decides
    gap = exact_top[..., -1] - exact_top[..., -2]
    undecidable = gap <= np.spacing(exact_top[..., -1].astype(np.float32)).astype(np.float64)
    wrong = argmax_wrong | tied
    assert tied.any(), "bfloat16 tied no pixel: the case this test is for did not arise"
    assert (tied & ~argmax_wrong).any(), "every tie fell on a wrong class: argmax alone counts it"

    (study,) = json.loads(segdiff_here(capsys, "compare", "--cache", cache, "--json").stdout)
    errors = {e["label"]: e for e in study["exact"]["errors"]}
    counted = errors["cpu b1 bf16 r0"]
    assert counted["wrong"] == np.count_nonzero(wrong) > np.count_nonzero(argmax_wrong)
    assert counted["undecidable"] == np.count_nonzero(wrong & undecidable)
    assert counted["wrong_tied"] == np.count_nonzero(tied & ~undecidable)
    assert counted["decided_wrong"] == np.count_nonzero(wrong & ~undecidable)

    api_error = {e.label: e for e in api.open_cache(cache).studies[0].exact().errors}[
        "cpu b1 bf16 r0"
    ]
    assert (api_error.wrong, api_error.wrong_tied) == (counted["wrong"], counted["wrong_tied"])

    diagnosis = segdiff_here(capsys, "diagnose", "--cache", cache).stdout
    said = " ".join(diagnosis.split())
    assert (
        f"cpu b1 bf16 r0 is wrong at {counted['decided_wrong']:,} pixels at argmax" in said
        and f"no class decided ({counted['wrong_tied']:,} of them)" in said
    )
    check = segdiff_here(capsys, "check", "--cache", cache, "--max-wrong", "0")
    assert check.returncode == 1, check.stdout
    assert (
        "FAIL cpu b1 bf16 r0 (" in check.stdout
        and f"wrong classes {counted['decided_wrong']:,} > 0" in check.stdout
        and f"{counted['wrong_tied']:,} of them tied" in check.stdout
    )


def test_export_s_csv_gives_the_exact_value_and_class_at_each_pixel(exact_cache, capsys, tmp_path):
    """The flipped (and at-risk) pixels beside the cached exact run, each line's
    exact value, class and decidability recomputed from the stored float64 map."""
    target = tmp_path / "flips.csv"
    result = segdiff_here(capsys, "export", "--cache", exact_cache, "--ref", "cpu b1 r0",
                          "--other", "cpu b1 bf16 r0", "--csv", target, "--at-risk")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(target.open()))
    store = ResultCache(exact_cache)
    (exact,) = [r for r in map(store.read_run, _keys(exact_cache)) if r.label == "cpu b1 fp64 r0"]
    assert_exact_pixels(rows, exact.probabilities, 0.5)
    assert {row["why"] for row in rows} == {"flip", "at-risk"}
