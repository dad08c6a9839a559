"""``python -m segdiff_gui.engine probe [RUNTIME]``: devices and build facts, one
ProbeAnswer. Where no GPU is seen, the answer says why, as far as the machine and the
runtime's own log say (its C++ log is quiet otherwise: TF_CPP_MIN_LOG_LEVEL=2)."""

from __future__ import annotations

import os
import re
from typing import Any

from segdiff_gui.core.protocol import ProbeAnswer
from segdiff_gui.engine.native_log import native_stderr
from segdiff_gui.engine.protocol import Channel

# What a runtime logs when it looks for a GPU and gives up.
_TELLING = re.compile(r"dlopen|cuInit|CUDA|cuda|GPU|libcu|driver", re.IGNORECASE)
_MAX_LOG_LINES = 3


def main(channel: Channel, runtime: str) -> int:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the probe's log is read, not shown
    lines: list[str] = []
    with native_stderr(lines):
        from segdiff_gui.engine.backends import load_backend
        from segdiff_gui.engine.facts import process_facts

        backend = load_backend(runtime)
        devices = backend.devices()
        facts = {"runtime": runtime, **process_facts(backend)}
    log = list(dict.fromkeys(line.rstrip(".") for line in lines if _TELLING.search(line)))
    channel.send(probe_answer(devices, facts, log[-_MAX_LOG_LINES:]))
    return 0


def probe_answer(
    devices: list[dict[str, Any]], facts: dict[str, Any], log: list[str]
) -> ProbeAnswer:
    """The devices and facts, and where no GPU is seen, why (the machine's reasons, then the
    runtime's ``log`` lines that tell)."""
    from segdiff_gui.engine.gpu_identity import absent_gpu_reasons

    facts = dict(facts)
    if not any(device["type"] == "GPU" for device in devices):
        reasons = absent_gpu_reasons()
        if facts.get("cuda_build") is False:
            reasons.append(f"this {facts.get('runtime', 'runtime')} is a CPU-only build")
        facts["gpu_absent"] = reasons + log
    return ProbeAnswer(devices, facts)
