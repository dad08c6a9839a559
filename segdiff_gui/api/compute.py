"""Computing a run request from Python: the same :class:`MatrixRequest` and runner as the CLI
and the window, with a progress bar, and the cached records of every run it planned."""

from __future__ import annotations

import warnings

from segdiff_gui.api.hints import hinted, with_argument
from segdiff_gui.api.progress import ProgressBar
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import printable
from segdiff_gui.runner.matrix import MatrixRunner
from segdiff_gui.runner.outcome import MatrixOutcome, follow
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.records import RunRecord

__all__ = ["claim_cache", "compute", "follow_with_bar"]


def compute(
    request: MatrixRequest, progress: bool = True, what: str = "runs"
) -> tuple[list[RunRecord], MatrixOutcome]:
    """Run ``request`` (what is cached is served from the cache) and return the records of
    its planned runs that are in the cache afterwards, with the outcome.

    An error in the input (a model that does not load, an image every run refuses) raises
    :class:`InputError`; a cancelled cell (KeyboardInterrupt) kills the child in flight and
    raises again; other failures are in the outcome, and each is written under the bar.
    """
    cache = request.cache
    try:
        claim_cache(request)
        runner = request.start()
    except InputError as error:
        raise with_argument(error) from None
    outcome = follow_with_bar(runner, progress, what)
    records = []
    for run in runner.plan.runs:
        if cache.has(run.key):
            try:
                records.append(cache.read_run(run.key, with_map=False))
            except InputError as error:  # damaged, and computing it again failed too
                warnings.warn(printable(str(error)), stacklevel=3)
    return records, outcome


def claim_cache(request: MatrixRequest) -> None:
    """The request's cache must be (or become) a segdiff cache before anything is planned."""
    request.cache.check_usable()
    request.cache.claim()


def follow_with_bar(runner: MatrixRunner, progress: bool, what: str) -> MatrixOutcome:
    """Drive ``runner`` to the end under a bar (``progress``) named ``what``; an interrupt or
    an error in the input raises, and each run that failed is said with its argument."""
    for entry in runner.plan.damaged:
        warnings.warn(printable(f"recomputing a damaged run: {entry}"), stacklevel=4)
    bar = ProgressBar(progress, what)
    try:
        outcome = follow(runner, bar)
    finally:
        bar.close()
    if outcome.interrupted:
        raise KeyboardInterrupt("the matrix was interrupted; the runs that finished are cached")
    if (stopped := outcome.input_error()) is not None:
        raise with_argument(stopped)
    for failure in outcome.failed:
        failure["error"] = hinted(failure["error"], failure.get("fix") or "")
        if not progress:  # the bar wrote it as it happened
            warnings.warn(printable(f"failed {failure['label']}: {failure['error']}"), stacklevel=4)
    return outcome
