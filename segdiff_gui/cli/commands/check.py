"""``segdiff check``: a reproducibility gate for CI, exit 1 when a run exceeds a bound."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.exit_codes import EXIT_FAILED_RUNS, EXIT_OK
from segdiff_gui.cli.parser_parts import (
    bound_float,
    bound_int,
    common,
    output_quantile,
    output_tolerance,
    selection,
)
from segdiff_gui.cli.running import (
    report_damaged,
)
from segdiff_gui.cli.stored_runs import studies_of
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.cli.text import say
from segdiff_gui.core.analysis import at_cutoff
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import GroupAnalysis
from segdiff_gui.core.tolerance import OutputTolerances
from segdiff_gui.runner.reports import (
    tolerance_summary,
)
from segdiff_gui.storage.loading import GroupStudy
from segdiff_gui.storage.studies import (
    output_names,
)

DESCRIPTION = (
    "A reproducibility gate: compare every run with its reference and exit 1, with one line per "
    "failure, when any exceeds a bound. With no bound, any flip fails."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    selection(parser)
    parser.add_argument("--max-flips", type=bound_int, metavar="N", help="flipped pixels allowed")
    parser.add_argument(
        "--max-ulp", type=bound_int, metavar="U", help="largest ULP distance allowed"
    )
    parser.add_argument(
        "--max-abs", type=bound_float, metavar="X", help="largest |difference| allowed"
    )
    parser.add_argument(
        "--max-wrong",
        type=bound_int,
        metavar="N",
        help="pixels allowed whose class differs from the exact (float64) run's where float32 "
        "could decide it, in every run, the reference's too (a group without an exact run "
        "fails)",
    )
    tolerances = parser.add_argument_group(
        "tolerances, as Polygraphy's",
        "Each output a model's runs stored is a group of its own: a tolerance given as "
        "OUTPUT:X is for that output (its name, or what --output chose), one given as X for "
        "every other. A tolerance not given is 0.",
    )
    tolerances.add_argument(
        "--atol",
        type=output_tolerance,
        nargs="+",
        action="extend",
        metavar="[OUTPUT:]X",
        help="absolute tolerance: a value fails where |Δ| > atol and |Δ|/|reference| > rtol "
        "(Polygraphy's elemwise check), e.g. --atol 1e-5 probs:1e-4",
    )
    tolerances.add_argument(
        "--rtol",
        type=output_tolerance,
        nargs="+",
        action="extend",
        metavar="[OUTPUT:]X",
        help="relative tolerance, a share of |reference| (see --atol)",
    )
    tolerances.add_argument(
        "--error-quantile",
        type=output_quantile,
        nargs="+",
        action="extend",
        metavar="[OUTPUT:]Q",
        help="check the Q-quantile of |Δ| against atol and of |Δ|/|reference| against rtol "
        "instead of every value (Polygraphy's --check-error-stat quantile --error-quantile "
        "Q), e.g. 0.99",
    )
    common(parser, "print the bounds, each run's figures and the failures as JSON")


def wrong_class_failures(study: GroupAnalysis, title: str, bound: int) -> list[str]:
    """``check --max-wrong``: a line per run (the reference's too) whose classes differ from
    the exact run's at more pixels float32 could decide than ``bound``; one line where the
    group has no exact run (a gate must not pass by not seeing)."""
    where = at_cutoff(study.cutoff, study.multiclass)
    if study.exact is None:
        return [
            f"FAIL {study.reference.label} ({title}): no exact run to count wrong classes "
            "against; run precision=float64 (the model in float64) for this image"
        ]
    failures = []
    for error in study.exact_errors.values():
        if error.decided_wrong > bound:
            notes = [
                *([f"{error.wrong_tied:,} of them tied"] if error.wrong_tied else []),
                *(
                    [f"{error.undecidable:,} more within 1 float32 ULP, not counted"]
                    if error.undecidable
                    else []
                ),
            ]
            failures.append(
                f"FAIL {error.label} ({title}): wrong classes {error.decided_wrong:,} > "
                f"{bound:,} against the exact run {study.exact.label} {where}"
                + (f" ({'; '.join(notes)})" if notes else "")
            )
    return failures


def _tolerances_of(args: argparse.Namespace, studies: list[GroupStudy]) -> OutputTolerances:
    """``--atol``, ``--rtol`` and ``--error-quantile`` as given; an output named that no
    group checked has is refused (a gate must not pass by not seeing)."""
    tolerances = OutputTolerances.of(args.atol or (), args.rtol or (), args.error_quantile or ())
    if not tolerances.named:
        return tolerances
    here = {name for _, record, _ in studies for name in output_names(record)}
    if missing := sorted(tolerances.named - here):
        outputs = ", ".join(sorted(here)) or "none named"
        raise InputError(
            "check",
            f"no run checked is of output {', '.join(missing)} (outputs here: {outputs}); "
            "give OUTPUT:X as the output's name or what --output chose",
        )
    return tolerances


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    bounds = {"flips": args.max_flips, "max_ulp": args.max_ulp, "max_abs": args.max_abs}
    _, studies, _, damaged = studies_of(args)
    status = report_damaged(err, damaged)
    tolerances = _tolerances_of(args, studies)
    if (
        args.max_wrong is None
        and all(bound is None for bound in bounds.values())
        and not tolerances.given
    ):
        bounds["flips"] = 0  # no bound named: any class flip fails
    # A value that is NaN where the reference has a number always fails: no bound covers it.
    bounds["nan_mismatches"] = 0
    # A gate that could not read a run must not pass by not seeing it: exit 2, and say so.
    unreadable = [f"FAIL unreadable: {entry}" for entry in damaged]
    failures, checked = [], 0
    within: list[dict[str, Any]] = []  # each run's figures under its output's tolerance
    for study, record, title in studies:
        for row in study.rows():
            checked += 1
            for name, bound in bounds.items():
                if bound is not None and row[name] > bound:
                    failures.append(
                        f"FAIL {row['label']} ({title}): "
                        f"{name.replace('_', ' ')} {row[name]:,} > {bound:,} against "
                        f"{row['reference']} {at_cutoff(study.cutoff, study.multiclass)}"
                    )
        summary = tolerance_summary(study, record, title, tolerances) if tolerances.given else None
        if summary is not None:
            within += summary.rows()
            failures += summary.failures()
        if args.max_wrong is not None:  # the reference is checked too, against the exact run
            checked += 1
            failures += wrong_class_failures(study, title, args.max_wrong)
    if checked == 0 and not damaged:
        raise InputError(
            "check",
            "found no run to compare with a reference (each model and "
            "image has a single run); run more configurations first",
        )
    if args.max_wrong is not None:
        bounds["wrong_vs_exact"] = args.max_wrong
    named = ", ".join(
        [
            f"{k.replace('_', ' ')} ≤ {v:,}"
            for k, v in bounds.items()
            if v is not None and k != "nan_mismatches"
        ]
        + ([tolerances.text()] if tolerances.given else [])
    )
    if args.json:
        _json(
            {
                "bounds": bounds,
                "tolerances": {**tolerances.to_dict(), "runs": within},
                "checked": checked,
                "failures": failures,
                "unreadable": unreadable,
            }
        )
    else:
        for line in unreadable + failures:
            say(out, line)
        verdict = "FAILED" if failures or unreadable else "OK"
        could_not = f", {len(unreadable)} could not be read" if unreadable else ""
        say(
            out,
            f"{verdict}: {_plural(checked, 'run')} checked against {named} (and no NaN where "
            f"the reference has a number); {len(failures)} over a bound{could_not}",
        )
    if status:
        return status
    return EXIT_FAILED_RUNS if failures else EXIT_OK
