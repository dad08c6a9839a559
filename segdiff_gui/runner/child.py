"""One engine child process: started with ``python -m`` (never forked from a process holding
Qt or TensorFlow), fed its job on stdin, read line by line from stdout with a deadline."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from segdiff_gui.core.environment import child_environment
from segdiff_gui.core.protocol import Message, decode_message

__all__ = ["ENGINE_FLAG", "ChildProcess", "ChildTimeout", "describe_exit", "engine_command"]

_STDERR_LINES = 60
_EOF = object()


class ChildTimeout(RuntimeError):
    pass


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (killed: out of memory?)" if name == "SIGKILL" else ""
        return f"died from {name}{hint}"
    return f"exited with code {returncode}"


ENGINE_FLAG = "--engine"


def engine_command(command: str) -> list[str]:
    """How to start an engine child (``command`` and its words: ``probe jax``). In a frozen
    app (PyInstaller) ``sys.executable`` is the app itself, which has no ``-m``: it starts
    its own engine with :data:`ENGINE_FLAG`. ``-P``: ``python -m`` would put the working
    folder first on the child's import path, and a file there named as a module that
    TensorFlow or the user's preprocessing imports would run in its place, unkeyed."""
    if getattr(sys, "frozen", False):
        return [sys.executable, ENGINE_FLAG, *command.split()]
    return [sys.executable, "-P", "-m", "segdiff_gui.engine", *command.split()]


def _checkout_path(environ: dict[str, str]) -> dict[str, str]:
    """A checkout run from its own folder, not installed, is found there: its child, started
    with ``-P``, is given that folder explicitly (segdiff's own code, not the user's)."""
    home = Path(__file__).resolve().parents[2]
    with contextlib.suppress(OSError):
        if Path.cwd().resolve() == home:
            paths = [str(home), *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))]
            return {"PYTHONPATH": os.pathsep.join(paths)}
    return {}


class ChildProcess:
    """A running ``python -m segdiff_gui.engine <command>``; iterate :meth:`messages`."""

    def __init__(
        self, command: str, job: dict[str, Any] | None = None, env: dict[str, str] | None = None
    ) -> None:
        child_env = {
            **child_environment(os.environ),
            **(env or {}),
            "PYTHONUNBUFFERED": "1",
            # The child compares its parent with this to notice when it is orphaned.
            "SEGDIFF_PARENT_PID": str(os.getpid()),
        }
        child_env.update(_checkout_path(child_env))
        self.process = subprocess.Popen(
            engine_command(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            text=True,
            encoding="utf-8",
            errors="replace",
            # Its own session: a Ctrl-C in the terminal reaches the runner, which cancels
            # cleanly, instead of interrupting TensorFlow mid-write.
            start_new_session=True,
        )
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.process.stdin.write(json.dumps(job or {}))
        with contextlib.suppress(BrokenPipeError, OSError):
            self.process.stdin.close()

    def _pump_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(_EOF)

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line.rstrip("\n"))

    def raw_lines(
        self,
        timeout_s: float,
        poll_s: float = 0.2,
        should_stop: Callable[[], bool] | None = None,
    ) -> Iterator[str]:
        """Yield stdout lines; raise :class:`ChildTimeout` after ``timeout_s`` without one.

        ``should_stop`` (a callable) is polled every ``poll_s``; when it returns true the
        iteration ends, leaving the caller to :meth:`kill` the child.
        """
        waited = 0.0
        while True:
            try:
                item = self._lines.get(timeout=poll_s)
            except queue.Empty:
                waited += poll_s
                if should_stop is not None and should_stop():
                    return
                if waited >= timeout_s:
                    raise ChildTimeout(f"no progress for {timeout_s:g} s") from None
                continue
            if item is _EOF:
                return
            waited = 0.0
            yield str(item)

    def messages(
        self, timeout_s: float, should_stop: Callable[[], bool] | None = None
    ) -> Iterator[Message]:
        for line in self.raw_lines(timeout_s, should_stop=should_stop):
            message = decode_message(line)
            if message is not None:
                yield message

    def lower_priority(self) -> None:
        """Run the child at a lower CPU priority (nice +10; "below normal" on Windows) for the
        rest of its life: it then takes only what children and a window at normal priority
        leave idle."""
        import psutil  # here: a cache hit, which starts no child, never imports it

        # Where it ended already, or this system allows no change, it runs as it is.
        with contextlib.suppress(psutil.Error, OSError):
            process = psutil.Process(self.process.pid)
            if os.name == "nt":
                process.nice(psutil.BELOW_NORMAL_PRIORITY_CLASS)
            else:  # ten below its parent's (inherited) priority, 19 at most
                process.nice(min(19, process.nice() + 10))

    def stderr_tail(self, lines: int = 20) -> str:
        self._threads[1].join(timeout=2)
        return "\n".join(list(self._stderr)[-lines:])

    def signal_kill(self) -> None:
        """SIGKILL the child's whole process group (a hung TensorFlow ignores SIGTERM, and XLA's
        helpers such as ptxas would otherwise keep running); does not wait."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def close(self, grace_s: float = 5.0) -> int:
        """Reap the child: give it ``grace_s`` to exit by itself, then kill it; close pipes."""
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.signal_kill()
            self.process.wait()
        for thread in self._threads:
            thread.join(timeout=2)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode
