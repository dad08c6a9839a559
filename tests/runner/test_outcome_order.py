"""Two children at once finish in either order; ``--json`` lists the runs as they were asked."""

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.protocol import RunCached, RunFinished
from segdiff_gui.runner import plan_matrix
from segdiff_gui.runner.outcome import MatrixOutcome


def test_the_outcome_lists_runs_in_the_plans_order_whatever_order_they_ended_in(
    models, small_images, cache
):
    configs = [RunConfig(), RunConfig(threads=1), RunConfig(batch=4)]
    plan = plan_matrix(models / "tiny.keras", small_images[:1], configs, cache=cache, repeats=1)
    outcome = MatrixOutcome()
    last, *others = plan.runs
    for run in reversed(others):
        outcome.record(RunFinished(run.key, run.label, 0.1, "cpu:0"))
    outcome.record(RunCached(last.key, last.label))
    assert [r["label"] for r in outcome.runs] != [run.label for run in plan.runs]
    assert [r["label"] for r in outcome.in_plan_order(plan)] == [run.label for run in plan.runs]
