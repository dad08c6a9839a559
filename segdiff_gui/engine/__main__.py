"""Child entry point: ``python -m segdiff_gui.engine run`` (job JSON on stdin) or ``probe``.

The process-level settings are applied here, before anything imports TensorFlow.
"""

from __future__ import annotations

import json
import sys

from segdiff_gui.core.job import EngineJob
from segdiff_gui.engine.environment import apply_common_settings, apply_process_settings
from segdiff_gui.engine.protocol import Channel, die_with_parent


def main(argv: list[str]) -> int:
    die_with_parent()
    command = argv[0] if argv else ""
    if command == "run":
        job = EngineJob.from_dict(json.loads(sys.stdin.read()))
        settings = job.process_config()
        apply_process_settings(settings.determinism, settings.onednn, settings.threads)
        channel = Channel()
        from segdiff_gui.engine.worker import run_job

        return run_job(job, channel)
    if command == "inspect":
        request = json.loads(sys.stdin.read())
        apply_common_settings()
        channel = Channel()
        from segdiff_gui.engine import inspect_model

        return inspect_model.main(channel, request)
    if command == "probe":
        apply_common_settings()  # report TensorFlow as the user's environment sets it up
        channel = Channel()
        from segdiff_gui.engine import probe

        return probe.main(channel)
    print("usage: python -m segdiff_gui.engine run|probe|inspect", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
