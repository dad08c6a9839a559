"""The child's side of the JSON-lines channel to the runner.

Native TensorFlow code may print to file descriptor 1 at any time, so the channel is a private
duplicate of the original stdout and fd 1 is pointed at stderr: stray output can never corrupt
a message.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from typing import TextIO

from segdiff_gui.core.protocol import Message

__all__ = ["Channel", "die_with_parent"]


class Channel:
    def __init__(self) -> None:
        sys.stdout.flush()
        private_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._stream: TextIO = os.fdopen(private_fd, "w", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()  # a heartbeat thread sends too: whole lines only

    def send(self, message: Message) -> None:
        self.write_raw(message.to_json())

    def write_raw(self, line: str) -> None:
        try:
            with self._lock:
                self._stream.write(line + "\n")
                self._stream.flush()
        except BrokenPipeError:
            # The runner is gone: nobody will read our results' announcements; stop now.
            os._exit(1)


def die_with_parent() -> None:
    """On Linux, have the kernel kill this child when its parent dies (e.g. a kill -9 of the
    CLI), so no orphan keeps a GPU busy. Elsewhere the broken pipe ends it at the next message."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        parent = os.environ.get("SEGDIFF_PARENT_PID")
        if parent and os.getppid() != int(parent):  # it died before prctl took effect
            os._exit(1)
