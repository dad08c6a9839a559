"""A single-node Slurm cluster for one test session: munge, slurmctld and slurmd started as
this user (root, as in CI) with every file of theirs in one temporary folder, their own
ports, no systemd and no cgroups (``proctrack/linuxproc``, ``task/none``), and stopped by the
process ids they wrote. Skipped, saying why, where Slurm is not installed or cannot start."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")


@dataclass(frozen=True)
class Cluster:
    folder: Path
    env: dict[str, str]  # SLURM_CONF: every client command talks to this cluster
    version: str

    def sbatch(self, *args: str | Path) -> str:
        """Submit; the job's id."""
        done = subprocess.run(
            ["sbatch", "--parsable", *map(str, args)],
            env=self.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"sbatch failed: {done.stderr.strip()}")
        return done.stdout.strip().split(";")[0]

    def wait(self, job: str, deadline_s: float) -> None:
        """Until no task of ``job`` is queued or running, at most ``deadline_s``."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            queued = subprocess.run(
                ["squeue", "--noheader", "--jobs", job],
                env=self.env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            if queued.returncode == 0 and not queued.stdout.strip():
                return
            time.sleep(1)
        raise TimeoutError(f"Slurm job {job} still queued or running after {deadline_s:g} s")


def missing() -> str:
    """Why no cluster can be started here ("" when one can)."""
    absent = [name for name in DAEMONS if shutil.which(name) is None]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} not found; apt-get install slurm-wlm)"
    if os.geteuid() != 0:
        return "starting slurmctld and slurmd needs root here"
    return ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _config(folder: Path, host: str) -> str:
    """The cluster's slurm.conf: the controller and the node at 127.0.0.1, so that no name
    lookup of this host is needed (a container may not resolve its own name)."""
    munge = folder / "munge"
    return f"""ClusterName=segdiff-test
SlurmctldHost={host}(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket={munge / "munge.socket"}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmdSpoolDir={folder / "spool"}
StateSaveLocation={folder / "state"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / "slurmd.log"}
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _pid(path: Path, deadline_s: float = 30) -> int:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return int(path.read_text().strip())
        time.sleep(0.2)
    raise RuntimeError(f"{path.name} was not written within {deadline_s:g} s")


@contextmanager
def single_node_cluster(folder: Path) -> Iterator[Cluster]:
    """Start munge, slurmctld and slurmd in ``folder``; stop them, by the ids they wrote."""
    host = socket.gethostname()
    munge = folder / "munge"
    for part in (munge, folder / "spool", folder / "state"):
        part.mkdir(parents=True)
    munge.chmod(0o700)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, host))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started: list[int] = []
    try:
        subprocess.run(
            ["munged", f"--socket={munge / 'munge.socket'}", f"--key-file={key}",
             f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
             f"--seed-file={munge / 'seed'}", "--force"],
            env=env, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        started.append(_pid(munge / "munged.pid"))
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run(
                [daemon, "-f", str(conf)], env=env, check=True, capture_output=True, timeout=60
            )
            started.append(_pid(folder / f"{daemon}.pid"))
        version = subprocess.run(
            ["sinfo", "--version"], env=env, capture_output=True, text=True, timeout=60
        ).stdout.strip()
        end = time.monotonic() + 60
        while "idle" not in subprocess.run(
            ["sinfo", "--noheader", "--format=%t"], env=env, capture_output=True, text=True,
            timeout=60,
        ).stdout:  # fmt: skip
            if time.monotonic() > end:
                raise RuntimeError("the Slurm node was not idle within 60 s: see slurmd.log")
            time.sleep(0.5)
        yield Cluster(folder, env, version)
    finally:
        _stop(started)


def _stop(pids: list[int]) -> None:
    """Each daemon asked to stop at once (slurmd takes seconds to): killed where it has not
    within 20 s."""
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 20
    for pid in reversed(pids):
        while _alive(pid):
            if time.monotonic() > end:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
