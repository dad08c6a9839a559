"""The shard a scheduler gave this process: a Slurm array task's place among the array's
indices (offsets, steps), a Kubernetes indexed Job's completion index, and one line where
there is none to give."""

from __future__ import annotations

import pytest

from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.shards import parse_shard


def _array(task: int, first: int, last: int, step: int | None = 1) -> dict[str, str]:
    """The variables Slurm sets in a task of ``sbatch --array=first-last:step``."""
    indices = range(first, last + 1, step or 1)
    variables = {
        "SLURM_ARRAY_TASK_ID": str(task),
        "SLURM_ARRAY_TASK_MIN": str(first),
        "SLURM_ARRAY_TASK_MAX": str(last),
        "SLURM_ARRAY_TASK_COUNT": str(len(indices)),
    }
    if step is not None:
        variables["SLURM_ARRAY_TASK_STEP"] = str(step)
    return variables


@pytest.mark.parametrize(
    ("first", "last", "step"),
    [(1, 8, 1), (0, 7, 1), (10, 17, 1), (1, 15, 2), (0, 21, 3), (5, 5, 1), (1, 8, None)],
)
def test_every_task_of_a_slurm_range_is_its_own_shard_in_order(first, last, step):
    indices = list(range(first, last + 1, step or 1))
    shards = [parse_shard("slurm", _array(task, first, last, step)) for task in indices]
    assert shards == [(k, len(indices)) for k in range(1, len(indices) + 1)]


def test_a_slurm_array_of_listed_indices_or_a_task_outside_one_is_one_line():
    # --array=1,3,8: no task is given its place in the list. Slurm 22.05.8 set MIN 1, MAX 8,
    # COUNT 3 and STEP 1 in each of its tasks.
    listed = {**_array(3, 1, 8), "SLURM_ARRAY_TASK_COUNT": "3"}
    with pytest.raises(ConfigError, match=r"is not a range with one step .*give the shard as K/N"):
        parse_shard("slurm", listed)
    with pytest.raises(ConfigError, match="SLURM_ARRAY_TASK_ID is not set; run it in a Slurm"):
        parse_shard("slurm", {"SLURM_JOB_ID": "12"})  # a job, not an array task
    with pytest.raises(ConfigError, match=r"array task 4 is not one of 1-15:2"):
        parse_shard("slurm", _array(4, 1, 15, 2))
    with pytest.raises(ConfigError, match=r"SLURM_ARRAY_TASK_MIN='x' is not a whole number"):
        parse_shard("slurm", {**_array(1, 1, 4), "SLURM_ARRAY_TASK_MIN": "x"})


def test_a_kubernetes_pod_is_its_completion_index_plus_one():
    assert [parse_shard("k8s/4", {"JOB_COMPLETION_INDEX": str(i)}) for i in range(4)] == [
        (1, 4), (2, 4), (3, 4), (4, 4)
    ]  # fmt: skip
    assert parse_shard("kubernetes/2", {"JOB_COMPLETION_INDEX": "1"}) == (2, 2)
    with pytest.raises(ConfigError, match="JOB_COMPLETION_INDEX 4 is outside 0–3"):
        parse_shard("k8s/4", {"JOB_COMPLETION_INDEX": "4"})
    with pytest.raises(ConfigError, match="JOB_COMPLETION_INDEX is not set"):
        parse_shard("k8s/4", {})
    with pytest.raises(ConfigError, match="give the indexed Job's completions, e.g. k8s/8"):
        parse_shard("k8s", {"JOB_COMPLETION_INDEX": "0"})


def test_a_shard_written_out_is_taken_as_it_is():
    assert parse_shard("2/8", {}) == (2, 8)
    for bad in ("4/3", "0/3"):
        with pytest.raises(ConfigError, match="K must be between 1 and N"):
            parse_shard(bad, {})
    with pytest.raises(ConfigError, match="is not K/N .*, slurm, or k8s/N"):
        parse_shard("sge", {})
