"""A run request written back as the ``segdiff run`` that makes it: the one place that turns
a :class:`MatrixRequest` into command-line words (``reproduce``'s "the same run again"), so
that a command segdiff suggests asks for the very runs, and keys, it names. The inverse of
``request_of`` and ``checked_run_inputs``: every model setting, configuration, repeat count,
target, sweep, timeout and cache the request holds."""

from __future__ import annotations

import shlex

from segdiff_gui.cli.parser import command_flags
from segdiff_gui.core.defaults import DEFAULT_REPEATS, DEFAULT_TIMEOUT_S
from segdiff_gui.core.model_settings import option_values
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.locations import default_cache_dir

__all__ = ["run_command", "run_words"]


def run_words(request: MatrixRequest) -> list[str]:
    """``segdiff run MODEL IMAGES… [options]`` for ``request``, as words. Its configurations
    are written one ``--config`` each, with only the knobs away from their defaults; none is
    ``segdiff run``'s own default matrix."""
    flags = command_flags("run")
    words = ["segdiff", "run", str(request.model), *map(str, request.images)]
    if request.target is not None:
        words += [flags["target"], request.target]
    for config in request.configs:
        words += [flags["config"], request.knobs.changed_spec(config)]
    if request.repeats != DEFAULT_REPEATS:
        words += [flags["repeats"], str(request.repeats)]
    for dest, value in option_values(request.settings).items():
        words += [flags[dest]] if value is True else [flags[dest], str(value)]
    if request.shard is not None:
        words += [flags["shard"], "/".join(map(str, request.shard))]
    elif request.sweep:
        words.append(flags["sweep"])
    if request.timeout_s != DEFAULT_TIMEOUT_S:
        words += [flags["timeout"], repr(request.timeout_s)]
    if request.cache.root != default_cache_dir():
        words += [flags["cache"], str(request.cache.root)]
    return words


def run_command(request: MatrixRequest) -> str:
    """:func:`run_words` as one line a shell reads back into the same words."""
    return shlex.join(run_words(request))
