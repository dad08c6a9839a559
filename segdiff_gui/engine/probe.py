"""``python -m segdiff_gui.engine probe [RUNTIME]``: devices and build facts, one
ProbeAnswer. Where no GPU is seen, the answer says why, as far as the machine and the
runtime's own log say (its C++ log is quiet otherwise: TF_CPP_MIN_LOG_LEVEL=2)."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator

from segdiff_gui.core.protocol import ProbeAnswer
from segdiff_gui.engine.protocol import Channel

# What a runtime logs when it looks for a GPU and gives up.
_TELLING = re.compile(r"dlopen|cuInit|CUDA|cuda|GPU|libcu|driver", re.IGNORECASE)
_MAX_LOG_LINES = 3
# glog's prefix: "I0000 00:00:1796136727.614552   17446 cudart_stub.cc:31] ".
_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


@contextlib.contextmanager
def _stderr_captured(lines: list[str]) -> Iterator[None]:
    """Send fd 2 to a file meanwhile (native code writes there) and keep its telling lines."""
    with tempfile.TemporaryFile(mode="w+b") as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", "replace")
            for line in text.splitlines():
                said = _LOG_PREFIX.sub("", line.strip()).rstrip(".")
                if _TELLING.search(said) and said not in lines:
                    lines.append(said)


def main(channel: Channel, runtime: str) -> int:
    from segdiff_gui.engine.gpu_identity import absent_gpu_reasons

    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the probe's log is read, not shown
    log: list[str] = []
    with _stderr_captured(log):
        from segdiff_gui.engine.backends import load_backend
        from segdiff_gui.engine.facts import process_facts

        backend = load_backend(runtime)
        devices = backend.devices()
        facts = process_facts(backend)
    if not any(device["type"] == "GPU" for device in devices):
        reasons = absent_gpu_reasons()
        if facts.get("cuda_build") is False:
            reasons.append(f"this {runtime} is a CPU-only build")
        facts["gpu_absent"] = reasons + log[-_MAX_LOG_LINES:]
    channel.send(ProbeAnswer(devices, facts))
    return 0
