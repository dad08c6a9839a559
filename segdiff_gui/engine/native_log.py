"""What native code (TensorFlow's C++ converter, XLA, CUDA's loaders) writes to fd 2, caught
while a step runs: Python's ``sys.stderr`` never sees it."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator

__all__ = ["native_stderr"]

# glog's prefix: "I0000 00:00:1796136727.614552   17446 cudart_stub.cc:31] ".
_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


@contextlib.contextmanager
def native_stderr(lines: list[str], echo: bool = False) -> Iterator[None]:
    """Send fd 2 to a file meanwhile; afterwards ``lines`` gets each line, its log prefix
    removed (and, with ``echo``, the text goes on to the real stderr: the child's log)."""
    with tempfile.TemporaryFile(mode="w+b") as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            raw = capture.read()
            if echo:
                with contextlib.suppress(OSError):
                    os.write(2, raw)
            for line in raw.decode("utf-8", "replace").splitlines():
                if said := _LOG_PREFIX.sub("", line.strip()):
                    lines.append(said)
