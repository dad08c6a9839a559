"""``segdiff devices``: the devices each installed runtime sees, and its build, asked of child
processes."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    common,
)
from segdiff_gui.cli.running import (
    open_cache,
)
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.cli.text import say
from segdiff_gui.core.runtime_defaults import Machine, keras_predict_compiles
from segdiff_gui.core.runtimes import RUNTIMES, installed_runtimes
from segdiff_gui.core.text import printable
from segdiff_gui.runner.devices import ProbeError, build_text, probe_runtimes

DESCRIPTION = (
    "Start each installed runtime (TensorFlow, JAX, PyTorch) in a child process and report the "
    "devices it sees (GPUs with their name, memory, UUID and driver), its build (CUDA/cuDNN), "
    "the CPU, and, where it sees no GPU, why."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    common(parser, "print the probe as JSON on stdout")


def _identity_text(device: dict[str, Any]) -> str:
    capability = ".".join(map(str, device.get("compute_capability", [])))
    identity = device.get("identity") or {}
    parts = [f"sm {capability}"] if capability else []
    if isinstance(memory := identity.get("memory_mib"), int):  # nvidia-smi may say [N/A]
        parts.append(f"{memory / 1024:,.0f} GiB")
    if uuid := identity.get("uuid"):
        parts.append(str(uuid))
    if driver := identity.get("driver"):
        parts.append(f"driver {driver}")
    return f" ({', '.join(parts)})" if parts else ""


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """What every installed runtime sees: its devices (GPUs by name, memory, UUID, driver),
    its build, and, where it sees no GPU, why."""
    cache = open_cache(args, writing=True)
    runtimes = [runtime.name for runtime in installed_runtimes(one_per_engine=True)]
    probes, failed = {}, {}
    for name, answer in probe_runtimes(cache.root, runtimes, fresh=True).items():
        if isinstance(answer, ProbeError):  # one runtime that cannot start hides no other
            failed[name] = str(answer)
        else:
            probes[name] = answer
    if args.json:
        _json({**probes.get("tensorflow", {}), "runtimes": probes, "failed": failed})
        return EXIT_OK
    table = FittedTable(title="Devices each runtime sees")
    table.name("runtime")
    table.name("device")
    table.figure("type", justify="left")
    table.text("description")
    for name, probe in probes.items():
        for device in probe["devices"]:
            cells = (device["name"], device["type"], device["description"] + _identity_text(device))
            table.add_row(RUNTIMES[name].family, *(printable(str(cell)) for cell in cells))
    out.print(table)
    for name, probe in probes.items():
        facts = probe["facts"]
        say(out, build_text(facts))
        if not any(device["type"] == "GPU" for device in probe["devices"]):
            reasons = RUNTIMES[name].no_gpu(facts)
            say(out, f"  No GPU visible to {RUNTIMES[name].family}: {reasons}.")
    if probes:
        facts = next(iter(probes.values()))["facts"]
        say(
            out,
            f"numpy {facts['numpy_version']}, h5py {facts['h5py_version']}; CPU: "
            f"{facts['cpu_model']} on {facts['hostname']}",
        )
    if "tensorflow" in probes:
        facts = probes["tensorflow"]["facts"]
        gpu = any(device["type"] == "GPU" for device in probes["tensorflow"]["devices"])
        xla = keras_predict_compiles("tensorflow", Machine(tensorflow_accelerator=gpu), False)
        out.print(
            f"TensorFlow's own defaults here: oneDNN {'on' if facts['onednn_enabled'] else 'off'}, "
            f"intra-op threads {facts['intra_op_threads'] or 'default'}, model.predict "
            f"{'with' if xla else 'without'} XLA (runs keep all three unless asked: "
            "onednn=on|off, threads=N, xla=on|off)"
        )
    for name, problem in failed.items():
        say(out, f"{RUNTIMES[name].title}: {problem}")
    missing = {r.family: r for r in RUNTIMES.values() if not r.installed()}
    if missing:
        out.print(
            "Not installed: "
            + ", ".join(f"{name} (pip install 'segdiff[{r.extra}]')" for name, r in missing.items())
        )
    return EXIT_OK
