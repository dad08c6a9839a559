"""Child entry point: ``python -m segdiff_gui.engine run`` (job JSON on stdin), ``probe
[RUNTIME]`` or ``inspect``.

The process-level settings are applied here, before anything imports the runtime.
"""

from __future__ import annotations

import json
import sys

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.job import EngineJob
from segdiff_gui.core.protocol import ChildFatal
from segdiff_gui.core.runtimes import RUNTIMES, installed_runtimes
from segdiff_gui.engine.environment import (
    apply_common_settings,
    apply_process_settings,
    unused_imports_skipped,
)
from segdiff_gui.engine.protocol import Channel, die_with_parent


def _run(channel: Channel) -> int:
    job = EngineJob.from_dict(json.loads(sys.stdin.read()))
    settings = job.process_config()
    try:
        apply_process_settings(settings, any(run.config.is_gpu for run in job.runs))
    except InputError as error:  # a knob this runtime's version cannot take
        channel.send(ChildFatal(error.path, error.problem, ""))
        return 3
    with unused_imports_skipped(settings.runtime):  # the runtime is imported here
        from segdiff_gui.engine.backends import load_backend
        from segdiff_gui.engine.worker import run_job

        backend = load_backend(settings.runtime)  # serves every runtime of the job
        if job.probes_layers:  # the probe's modules only where it probes
            from segdiff_gui.engine.layer_probe import probe_run
    if job.probes_layers:  # each run probed layer by layer, not computed
        return run_job(job, channel, backend, probe_run)
    return run_job(job, channel, backend)


def _inspection_runtime() -> str:
    """Any installed runtime reads a model's shapes alike: TensorFlow where it is there."""
    installed = installed_runtimes()
    return installed[0].name if installed else "tensorflow"


def main(argv: list[str]) -> int:
    die_with_parent()
    command = argv[0] if argv else ""
    if command == "run":
        return _run(Channel())
    if command == "inspect":
        request = json.loads(sys.stdin.read())
        runtime = _inspection_runtime()
        apply_common_settings(runtime)
        channel = Channel()
        with unused_imports_skipped(runtime):  # the runtime is imported here
            import keras  # noqa: F401 - imported for its side: the model loads after

            from segdiff_gui.engine import inspect_model

        return inspect_model.main(channel, request)
    if command == "probe":
        runtime = argv[1] if len(argv) > 1 else "tensorflow"
        if runtime not in RUNTIMES:
            print(f"unknown runtime {runtime!r}", file=sys.stderr)
            return 2
        apply_common_settings(runtime)  # report the runtime as the user's environment sets it
        channel = Channel()
        from segdiff_gui.engine import probe

        with unused_imports_skipped(runtime):
            return probe.main(channel, runtime)
    print("usage: python -m segdiff_gui.engine run|probe [RUNTIME]|inspect", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
