"""A study keeps the exact (float64) run beside its reference, and its diagnosis says which
answer is right."""

from __future__ import annotations

import numpy as np
import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.diagnosis import TOPICS, by_topic, diagnose
from segdiff_gui.core.study import GroupAnalysis
from tests.exact_runs import BELOW, C32, CUT, exact_config, exact_values, study_run


def test_the_exact_run_is_kept_beside_the_reference_never_among_the_runs():
    exact = exact_values()
    cpu = study_run("cpu", RunConfig(), exact.astype(np.float32))
    bf16 = study_run(
        "bf16", RunConfig(precision="mixed_bfloat16"), (exact + 3e-3).astype(np.float32)
    )
    fp64 = study_run("fp64", exact_config(), exact)
    study = GroupAnalysis([bf16, cpu], cutoff=CUT, exact=fp64)
    assert study.reference is cpu and study.others == [bf16]
    assert study.exact is fp64 and study.all_runs == [bf16, cpu, fp64]
    assert set(study.comparisons) == {bf16.key}
    assert set(study.exact_errors) == {cpu.key, bf16.key}
    moved = study.at_cutoff(0.6)
    assert moved.exact is fp64 and moved.exact_errors[bf16.key].cutoff == 0.6
    # Another reference: the exact run stays beside it.
    chosen = GroupAnalysis([bf16, cpu], cutoff=CUT, reference=bf16, exact=fp64)
    assert [e.label for e in chosen.exact_summary().errors] == ["bf16 r0", "cpu r0"]
    with pytest.raises(ValueError, match="not a float32 map"):
        GroupAnalysis([cpu, fp64], cutoff=CUT)
    with pytest.raises(ValueError, match="the exact map's shape"):
        GroupAnalysis([cpu], cutoff=CUT, exact=study_run("fp64", exact_config(), exact[:4]))


def test_a_study_without_an_exact_run_says_nothing_of_it():
    values = exact_values().astype(np.float32)
    study = GroupAnalysis(
        [study_run("cpu", RunConfig(), values), study_run("b8", RunConfig(batch=8), values)]
    )
    assert study.exact is None and study.exact_errors == {} and study.flip_sides == {}
    assert not [f for f in diagnose(study) if f.topic == "exact"]


def test_bfloat16_is_wrong_where_float32_could_decide_and_the_reference_is_right():
    exact = exact_values()
    shifted = (exact + 3e-3).astype(np.float32)
    study = GroupAnalysis(
        [
            study_run("cpu", RunConfig(), exact.astype(np.float32)),
            study_run("bf16", RunConfig(precision="mixed_bfloat16"), shifted),
        ],
        cutoff=CUT,
        exact=study_run("fp64", exact_config(), exact),
    )
    truth = exact >= C32
    bf16_wrong = int(np.count_nonzero((shifted >= np.float32(CUT)) != truth))
    assert bf16_wrong == 4  # three of the grid, and the hair below the cutoff
    sides = study.flip_sides["key-bf16-0"]
    # cpu is wrong only at the hair below the cutoff, which float32 cannot decide.
    assert (sides.flips, sides.first_right, sides.second_right) == (3, 3, 0)
    findings = [f.sentence for f in diagnose(study) if f.topic == "exact"]
    assert (
        "At cutoff 0.5 cpu r0 and bf16 r0 disagree on 3 pixels; the exact class agrees with "
        "cpu r0 at 3 and with bf16 r0 at 0; 0 lie within 1 float32 ULP (5.96e-08) of the "
        "cutoff." in findings
    )
    assert (
        "bf16 r0 is wrong at 3 pixels at cutoff 0.5: its class there differs from the exact "
        "(float64) map's, and float32 could have decided them; 1 more lies within 1 float32 "
        "ULP (5.96e-08) of the cutoff." in findings
    )
    assert "cpu r0 is right at every pixel float32 can decide." in findings
    assert any(f.startswith("cpu r0 against the exact float64 map: max |Δ|") for f in findings)
    assert ("Which answer is right?", findings) in [
        (title, [f.sentence for f in chosen]) for title, chosen in by_topic(diagnose(study))
    ]
    assert list(TOPICS).index("exact") == list(TOPICS).index("cutoff") + 1


def test_neither_is_wrong_where_every_disagreement_is_within_an_ulp_of_the_cutoff():
    exact = exact_values()
    cpu = exact.astype(np.float32)  # correctly rounded: the hair below becomes the cutoff
    other = cpu.copy()
    other[0, 0] = other[0, 1] = BELOW  # one ULP down on both
    study = GroupAnalysis(
        [study_run("cpu", RunConfig(), cpu), study_run("b8", RunConfig(batch=8), other)],
        cutoff=CUT,
        exact=study_run("fp64", exact_config(), exact),
    )
    sides = study.flip_sides["key-b8-0"]
    assert (sides.flips, sides.first_right, sides.second_right, sides.undecidable) == (2, 1, 1, 2)
    findings = [f.sentence for f in diagnose(study) if f.topic == "exact"]
    assert findings[-1] == (
        "Neither is wrong: wherever a run's class differs from the exact map's at cutoff 0.5 "
        "(2 pixels over the runs), the pixel lies within 1 float32 ULP (5.96e-08) of the "
        "cutoff, where float32 cannot decide its class: the runs differ there by rounding, "
        "not error."
    )


def test_flips_without_an_exact_run_offer_the_run_that_says_which_side_is_right():
    exact = exact_values()
    cpu = study_run("cpu", RunConfig(), exact.astype(np.float32))
    bf16 = study_run(
        "bf16", RunConfig(precision="mixed_bfloat16"), (exact + 3e-3).astype(np.float32)
    )
    flips = GroupAnalysis([bf16, cpu], cutoff=CUT).flip_count(bf16)
    assert flips > 0
    (missing,) = [
        f for f in diagnose(GroupAnalysis([bf16, cpu], cutoff=CUT)) if "Which side" in f.sentence
    ]
    assert missing.topic == "not measured" and missing.measure == ("precision=float64",)
    assert missing.sentence.startswith(f"Which side of the {flips} flips is right was not measured")
    # A reference that cannot compute in float64 (a converted model): the plain exact run.
    litert = study_run("litert", RunConfig(runtime="litert"), exact.astype(np.float32))
    (missing,) = [
        f for f in diagnose(GroupAnalysis([bf16, litert], cutoff=CUT, reference=litert))
        if "Which side" in f.sentence
    ]  # fmt: skip
    assert missing.measure == ("precision=float64",)
    # Measured: the exact run answers it; no flips: nothing to answer.
    fp64 = study_run("fp64", exact_config(), exact)
    answered = diagnose(GroupAnalysis([bf16, cpu], cutoff=CUT, exact=fp64))
    assert not [f for f in answered if "Which side" in f.sentence]
    b8 = study_run("b8", RunConfig(batch=8), exact.astype(np.float32))
    assert not [
        f for f in diagnose(GroupAnalysis([b8, cpu], cutoff=CUT)) if "Which side" in f.sentence
    ]


def test_repeats_that_agree_bit_for_bit_are_said_once_against_the_exact_map():
    exact = exact_values()
    cpu = study_run("cpu", RunConfig(), exact.astype(np.float32))
    bf16 = RunConfig(precision="mixed_bfloat16")
    shifted = (exact + 3e-3).astype(np.float32)
    first, again = study_run("bf16", bf16, shifted, 0), study_run("bf16", bf16, shifted.copy(), 1)
    fp64 = study_run("fp64", exact_config(), exact)
    said = [
        f.sentence for f in diagnose(GroupAnalysis([cpu, first, again], cutoff=CUT, exact=fp64))
    ]
    assert sum(s.startswith("bf16 r0, r1 against the exact float64 map") for s in said) == 1
    assert not [s for s in said if s.startswith(("bf16 r0 ", "bf16 r1 "))]
    assert sum("and bf16 r0, r1 disagree on" in s for s in said) == 1
    assert sum(s.startswith("bf16 r0, r1 is wrong at") for s in said) == 1
    # A repeat that moved is said on its own.
    moved = shifted.copy()
    moved[5, 5] = np.nextafter(moved[5, 5], np.float32(1))
    said = [
        f.sentence
        for f in diagnose(
            GroupAnalysis([cpu, first, study_run("bf16", bf16, moved, 1)], cutoff=CUT, exact=fp64)
        )
    ]
    assert sum(s.startswith("bf16 r0 against the exact") for s in said) == 1
    assert sum(s.startswith("bf16 r1 against the exact") for s in said) == 1
