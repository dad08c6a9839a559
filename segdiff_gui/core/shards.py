"""Which shard of a test set this process runs: ``K/N`` as written, or read from the
scheduler that started it (a Slurm array task, a Kubernetes indexed Job's pod), so that an
array script needs no arithmetic. Shard ``K`` of ``N`` is 1-based (runner/plan.shard_slice
cuts the images); every answer here is that pair, or one line saying why there is none."""

from __future__ import annotations

from collections.abc import Mapping

from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.limits import MAX_SHARDS

__all__ = ["SCHEDULERS", "parse_shard", "shard_of", "shard_slice", "shard_unit"]

# What ``--shard`` takes besides K/N: the scheduler's name, and for Kubernetes N (a pod is
# given its index, never the Job's number of completions).
SCHEDULERS = ("slurm", "k8s/N")

_SLURM = "SLURM_ARRAY_TASK_"


def shard_slice(count: int, shard: tuple[int, int], unit: int = 1) -> range:
    """The images of shard ``K`` of ``N`` (1-based) of ``count``: a contiguous block of the
    set's order, so the same image list always splits the same way on every machine, cut
    between blocks of ``unit`` images (a sweep's batches: :func:`shard_unit`)."""
    number, total = shard
    blocks = -(-count // unit)
    return range(
        min((number - 1) * blocks // total * unit, count),
        min(number * blocks // total * unit, count),
    )


def shard_of(count: int, total: int, index: int, unit: int = 1) -> int:
    """The shard K of ``total`` whose :func:`shard_slice` holds place ``index``."""
    blocks = -(-count // unit)
    return ((index // unit + 1) * total + blocks - 1) // blocks


def shard_unit(count: int, total: int, largest_batch: int) -> int:
    """What shards of a sweep of ``count`` images in ``total`` shards are cut at: the largest
    batch of the sweep, so that each batch of that size (and of any size dividing it) is
    computed by one shard only, where the set has a block of it for every shard; one image
    otherwise (no shard is left empty; a batch cut in two is computed by both, alike)."""
    return largest_batch if -(-count // largest_batch) >= total else 1


def parse_shard(value: str, environ: Mapping[str, str]) -> tuple[int, int]:
    """``K/N`` (1 ≤ K ≤ N ≤ :data:`MAX_SHARDS`), ``slurm`` or ``k8s/N`` (also
    ``kubernetes/N``) as (K, N)."""
    name, _, total = value.partition("/")
    if value == "slurm":
        shard = slurm_shard(environ)
    elif name in ("k8s", "kubernetes"):
        shard = kubernetes_shard(_count(total, value), environ)
    else:
        try:
            shard = int(name), int(total)
        except ValueError:
            raise ConfigError(f"{value!r} is not K/N (e.g. 2/8), slurm, or k8s/N") from None
        if not 1 <= shard[0] <= shard[1]:
            raise ConfigError(f"{value!r}: K must be between 1 and N")
    if shard[1] > MAX_SHARDS:  # its test-set record would be refused wherever it is read
        raise ConfigError(f"{value!r}: {shard[1]:,} shards, over segdiff's bound of {MAX_SHARDS:,}")
    return shard


def slurm_shard(environ: Mapping[str, str]) -> tuple[int, int]:
    """This array task's shard: its place among the array's indices, counted from the first.
    ``--array=0-7``, ``1-8`` and ``10-24:2`` are each 8 shards; an array of listed indices
    (``1,3,8``) gives no task its place, so it is refused, as is a task outside an array."""
    if _SLURM + "ID" not in environ:
        raise ConfigError(
            "slurm: SLURM_ARRAY_TASK_ID is not set; run it in a Slurm array task "
            "(sbatch --array=1-N), or give the shard as K/N"
        )
    task, first, count = (_integer(environ, _SLURM + key) for key in ("ID", "MIN", "COUNT"))
    last = _integer(environ, _SLURM + "MAX") if _SLURM + "MAX" in environ else first
    step = _integer(environ, _SLURM + "STEP") if _SLURM + "STEP" in environ else 1
    if step < 1 or count < 1 or first + (count - 1) * step != last or task < first:
        raise ConfigError(
            f"slurm: array task {task} of an array of {count} indices from {first} to "
            f"{last} is not a range with one step (sbatch --array=A-B or A-B:S); give the "
            "shard as K/N"
        )
    offset, apart = divmod(task - first, step)
    if apart or offset >= count:
        raise ConfigError(
            f"slurm: array task {task} is not one of {first}-{last}:{step}; give the shard as K/N"
        )
    return offset + 1, count


def kubernetes_shard(count: int, environ: Mapping[str, str]) -> tuple[int, int]:
    """This pod's shard in an indexed Job of ``count`` completions: its 0-based
    ``JOB_COMPLETION_INDEX`` plus one."""
    if "JOB_COMPLETION_INDEX" not in environ:
        raise ConfigError(
            f"k8s/{count}: JOB_COMPLETION_INDEX is not set; run it in a pod of an "
            "indexed Job (completionMode: Indexed), or give the shard as K/N"
        )
    index = _integer(environ, "JOB_COMPLETION_INDEX")
    if not 0 <= index < count:
        raise ConfigError(
            f"k8s/{count}: JOB_COMPLETION_INDEX {index} is outside 0–{count - 1}; "
            f"N must be the Job's completions"
        )
    return index + 1, count


def _count(text: str, value: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise ConfigError(f"{value!r}: give the indexed Job's completions, e.g. k8s/8") from None
    if count < 1:
        raise ConfigError(f"{value!r}: N must be at least 1")
    return count


def _integer(environ: Mapping[str, str], name: str) -> int:
    text = environ.get(name, "")
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not a whole number") from None
