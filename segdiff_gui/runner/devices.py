"""Which devices TensorFlow sees, asked of a child (the parent never imports TF).

The answer is remembered per host, Python, TensorFlow version and visible-device setting, so
planning a default matrix does not pay TensorFlow's start-up every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from segdiff_gui.core.artefacts import artefact_format
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json, hash_bytes
from segdiff_gui.core.limits import MAX_TEXT_BYTES
from segdiff_gui.core.protocol import ChildFatal, Message, ModelAnswer, ProbeAnswer, decode_message
from segdiff_gui.core.runtime_defaults import Machine, needs_accelerator_answer
from segdiff_gui.core.runtimes import RUNTIMES, recorded_version
from segdiff_gui.io.artefacts import read_artefact
from segdiff_gui.runner.child import ChildProcess, ChildTimeout, describe_exit
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.small_files import read_small_file

__all__ = [
    "ProbeError",
    "build_text",
    "gpu_names",
    "inspect_model",
    "machine_defaults",
    "no_gpu_possible",
    "probe_devices",
    "probe_runtimes",
    "remember_inspection",
    "remember_probe",
    "remembered_probe",
    "sealed_answer",
    "tensorflow_gpus",
]

_MAX_AGE_S = 24 * 3600.0
# How long a probe or an inspection child may stay silent (it imports its framework first).
_ASK_TIMEOUT_S = 180.0


class ProbeError(RuntimeError):
    pass


def _installed_version(package: str) -> str:
    from importlib import metadata  # only when a fingerprint is asked for: slow to import

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def _cuda_packages() -> list[str]:
    """The CUDA libraries pip installed beside TensorFlow (``tensorflow[and-cuda]`` brings
    ``nvidia-*`` wheels), by their ``.dist-info`` folders: installing the ``gpu`` extra can make
    a GPU visible, so it must not leave a remembered "no GPU". Folder names only: reading
    every package's metadata would cost the window's start-up a tenth of a second."""
    found: set[str] = set()
    for entry in sys.path:
        folder = Path(entry)
        if entry and folder.is_dir():
            found.update(path.name for path in folder.glob("nvidia_*.dist-info"))
    return sorted(found)


def _driver_version() -> str:
    """The loaded NVIDIA kernel driver's version ("" without one): a new driver can change
    which GPUs TensorFlow accepts."""
    with contextlib.suppress(OSError):
        return Path("/sys/module/nvidia/version").read_text().strip()
    return ""


def _fingerprint(runtime: str = "tensorflow") -> str:
    """What the devices a runtime sees depend on: a remembered probe serves only while these
    are unchanged (and for a day at most)."""
    tf_version = _installed_version(RUNTIMES[runtime].package)
    nvidia = (
        sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*")) if Path("/dev").is_dir() else []
    )
    return hash_bytes(
        canonical_json(
            {
                "host": _host(),
                "python": sys.executable,
                "tf": tf_version,
                **({"runtime": runtime} if runtime != "tensorflow" else {}),
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "nvidia": nvidia,
                "cuda_packages": _cuda_packages(),
                "driver": _driver_version(),
            }
        ).encode()
    )[:16]


def ask_child(
    command: str,
    request: dict[str, Any] | None,
    answers: tuple[type[Message], ...],
    what: str,
    timeout_s: float,
    should_stop: Callable[[], bool] | None = None,
) -> Message:
    """Start ``python -m segdiff_gui.engine COMMAND`` and return its first message of one of
    the ``answers`` types; a silent, crashed or hung child is a :class:`ProbeError`, and so
    is one whose question ``should_stop`` withdraws (it is killed at once)."""
    child = ChildProcess(command, request)
    try:
        for line in child.raw_lines(timeout_s, should_stop=should_stop):
            message = decode_message(line)
            if isinstance(message, answers):
                return message
        if should_stop is not None and should_stop():
            child.signal_kill()
            raise ProbeError(f"{what}: stopped")
    except ChildTimeout as error:
        child.signal_kill()
        raise ProbeError(f"{what}: {error}") from None
    finally:
        child.close()
    said = "; ".join(line.strip() for line in child.stderr_tail(5).splitlines() if line.strip())
    raise ProbeError(f"{what} {describe_exit(child.process.returncode)}: {said}")


def _run_probe(
    timeout_s: float, runtime: str, should_stop: Callable[[], bool] | None = None
) -> dict[str, Any]:
    what = f"device probe ({RUNTIMES[runtime].title})"
    answer = ask_child(f"probe {runtime}", None, (ProbeAnswer,), what, timeout_s, should_stop)
    assert isinstance(answer, ProbeAnswer)
    return {"devices": answer.devices, "facts": answer.facts}


def remember_probe(state_dir: Path, answer: ProbeAnswer) -> None:
    """Keep what a run child of default settings said of the devices it sees, where no
    probe is remembered: the window's device list and About box then need no probe child."""
    remembered = state_dir / "probe" / f"{_fingerprint()}.json"
    if not _is_recent(remembered):
        _remember(state_dir, remembered, {"devices": answer.devices, "facts": answer.facts})


def _is_recent(remembered: Path) -> bool:
    return remembered.is_file() and time.time() - remembered.stat().st_mtime < _MAX_AGE_S


def remembered_probe(state_dir: Path) -> dict[str, Any] | None:
    """The last probe of this machine, if one was made; never starts TensorFlow."""
    return _recall(state_dir / "probe" / f"{_fingerprint()}.json")


def probe_devices(
    state_dir: Path | None = None,
    fresh: bool = False,
    timeout_s: float = _ASK_TIMEOUT_S,
    runtime: str = "tensorflow",
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """``{"devices": [...], "facts": {...}}`` of ``runtime``, from a child; remembered in
    ``state_dir``."""
    remembered = state_dir / "probe" / f"{_fingerprint(runtime)}.json" if state_dir else None
    if remembered is not None and not fresh and _is_recent(remembered):
        data = _recall(remembered)
        if data is not None:
            return data
    data = _run_probe(timeout_s, runtime, should_stop)
    if state_dir and remembered:
        _remember(state_dir, remembered, data)
    return data


def probe_runtimes(
    state_dir: Path, runtimes: Sequence[str], fresh: bool = False, timeout_s: float = _ASK_TIMEOUT_S
) -> dict[str, dict[str, Any] | ProbeError]:
    """Each of ``runtimes``' probe (as :func:`probe_devices`), or why it failed, in their
    order. Their children run side by side, as many at once as there are cores: each spends
    seconds of one core importing its framework (six runtimes one after another took 11.4 s
    on 2 cores). An interrupt (Ctrl-C) kills every child still asked and raises here."""
    stop = threading.Event()

    def probe(runtime: str) -> dict[str, Any] | ProbeError:
        if stop.is_set():  # interrupted before its turn: no child is started for it
            return ProbeError(f"device probe ({RUNTIMES[runtime].title}): stopped")
        try:
            return probe_devices(state_dir, fresh, timeout_s, runtime, stop.is_set)
        except ProbeError as error:
            return error

    at_once = max(1, min(len(runtimes), os.cpu_count() or 1))
    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="segdiff-probe")
    try:
        futures = [pool.submit(probe, runtime) for runtime in runtimes]
        return {runtime: future.result() for runtime, future in zip(runtimes, futures, strict=True)}
    except BaseException:
        stop.set()  # each child asked is killed within a poll of its lines
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def inspect_model(
    model_path: str | Path,
    trust: bool = False,
    timeout_s: float = _ASK_TIMEOUT_S,
    state_dir: Path | None = None,
    model_hash: str | None = None,
    fresh: bool = False,
) -> ModelAnswer | ChildFatal:
    """What a model takes and gives (asked of a child), or why it cannot be loaded.

    With ``state_dir`` and the model file's ``model_hash``, an answer is remembered for that
    file on this Python and TensorFlow: opening a known model again starts no TensorFlow
    child, which would take a core from the window while it starts. ``fresh`` asks the child
    even so (what is remembered is a hint: where what the user gives disagrees with it, the
    model is asked again), and remembers its answer. Refusals are not remembered (the user
    may come to trust the model)."""
    if artefact_format(model_path) is not None:  # said by its own bytes: no child
        return artefact_answer(Path(model_path))
    remembered = (
        _inspection_file(state_dir, Path(model_path), model_hash, trust)
        if state_dir and model_hash
        else None
    )
    if remembered and not fresh and (known := _recalled_answer(remembered)) is not None:
        return known
    request = {"model_path": str(model_path), "trust_model": trust}
    answer = ask_child("inspect", request, (ModelAnswer, ChildFatal), "model inspection", timeout_s)
    assert isinstance(answer, ModelAnswer | ChildFatal)
    if state_dir and remembered and isinstance(answer, ModelAnswer):
        _remember(state_dir, remembered, sealed_answer(remembered.stem, answer))
    return answer


def artefact_answer(path: Path) -> ModelAnswer | ChildFatal:
    """What an artefact takes and gives, read from its own bytes in this process (no child:
    its runtime need not be imported to know), or why it is refused, as a child says it."""
    try:
        facts = read_artefact(path)
    except InputError as error:
        return ChildFatal(str(error.path), error.problem, "", fix=error.fix)
    outputs = [
        {"name": output.name, "shape": list(output.shape), "dtype": output.dtype}
        for output in facts.outputs
    ]
    channels = [output["shape"][-1] if output["shape"] else None for output in outputs]
    return ModelAnswer(
        format=facts.format.name,
        input_shape=list(facts.input.shape),
        outputs=outputs,
        kinds=["sigmoid" if c == 1 else "softmax" for c in channels],
    )


def remembered_inspection(
    state_dir: Path, model_path: Path, model_hash: str, trust: bool
) -> ModelAnswer | None:
    """What a child said of this model file before (an inspection's or a run child's
    answer), or None: asks no child. An artefact says it from its own bytes."""
    if artefact_format(model_path) is not None:
        answer = artefact_answer(model_path)
        return answer if isinstance(answer, ModelAnswer) else None
    return _recalled_answer(_inspection_file(state_dir, model_path, model_hash, trust))


def sealed_answer(key: str, answer: ModelAnswer) -> dict[str, Any]:
    """A model's answer as it is remembered under ``key`` (its file's name): with the key and
    a SHA-256 over both, so that an answer edited, or copied from another model's file, is
    seen for what it is and asked of a child again."""
    body = {"key": key, "answer": answer.to_dict()}
    return {**body, "sha256": hash_bytes(canonical_json(body).encode())}


def _recalled_answer(path: Path) -> ModelAnswer | None:
    """The answer remembered at ``path``, where it is one: sealed for this very file (its
    key, its checksum) and of the types a child gives; else None (ask the model)."""
    known = _recall(path)
    if known is None or set(known) != {"key", "answer", "sha256"} or known["key"] != path.stem:
        return None
    try:  # what json.loads took, canonical_json writes back (RecursionError: too deep)
        body = canonical_json({"key": known["key"], "answer": known["answer"]})
        message = decode_message(json.dumps(known["answer"]))
    except RecursionError:
        return None
    if known["sha256"] != hash_bytes(body.encode()):
        return None
    return message if isinstance(message, ModelAnswer) and _well_formed(message) else None


def _is_size(value: object) -> bool:
    return value is None or (type(value) is int and 0 < value < 2**31)


def _well_formed(answer: ModelAnswer) -> bool:
    """A remembered answer is a file in the cache's folder that anyone could have written: it
    is used only where every field has the type a child gives (sizes positive integers or
    None, names and kinds text); anything else is asked of a child again."""
    outputs = answer.outputs if isinstance(answer.outputs, list) else None
    return (
        isinstance(answer.format, str)
        and isinstance(answer.input_shape, list)
        and len(answer.input_shape) <= 8
        and all(_is_size(size) for size in answer.input_shape)
        and outputs is not None
        and all(
            isinstance(output, dict)
            and isinstance(output.get("name"), str)
            and isinstance(output.get("shape"), list)
            and all(_is_size(size) for size in output["shape"])
            for output in outputs
        )
        and isinstance(answer.kinds, list)
        and len(answer.kinds) == len(outputs)  # one kind per output, as the window pairs them
        and all(isinstance(kind, str) for kind in answer.kinds)
        and isinstance(answer.dtype_policies, list)
        and all(isinstance(policy, str) for policy in answer.dtype_policies)
    )


def remember_inspection(
    state_dir: Path, model_path: Path, model_hash: str, trust: bool, answer: ModelAnswer
) -> None:
    """Keep what a run child said of the model it loaded, as an inspection's answer: the
    window then shows the model's facts without a TensorFlow child of its own."""
    remembered = _inspection_file(state_dir, model_path, model_hash, trust)
    _remember(state_dir, remembered, sealed_answer(remembered.stem, answer))


def _inspection_file(state_dir: Path, model_path: Path, model_hash: str, trust: bool) -> Path:
    return state_dir / "models" / f"{_inspection_key(model_path, model_hash, trust)}.json"


def _inspection_key(model_path: Path, model_hash: str, trust: bool) -> str:
    """What an inspection's answer depends on: the file's bytes and suffix (which says how it
    is loaded), the trust given, and the Python, TensorFlow and Keras that load it."""
    facts = {
        "model": model_hash,
        "suffix": model_path.suffix.lower(),
        "trust": trust,
        "environment": _fingerprint(),
        "keras": _installed_version("keras"),
        "legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS"),
    }
    return hash_bytes(canonical_json(facts).encode())


def _recall(path: Path) -> dict[str, Any] | None:
    """A remembered answer, or None: any file there could have been written by anyone (a
    FIFO there would have held the window's launch for ever, a link to /dev/zero filled its
    memory)."""
    with contextlib.suppress(InputError, ValueError, RecursionError):
        data = json.loads(read_small_file(path, MAX_TEXT_BYTES).decode("utf-8"))
        return data if isinstance(data, dict) else None
    return None


def _remember(state_dir: Path, path: Path, data: dict[str, Any]) -> None:
    """Write atomically: another window may be reading the same answer. Only into a folder
    that is a segdiff cache (storage's one rule, :meth:`ResultCache.claim`): a probe asked
    with a folder of the user's as its cache writes nothing there."""
    if not ResultCache(state_dir).is_marked:
        return
    with contextlib.suppress(OSError):  # only a shortcut: failing to write it costs nothing
        path.parent.mkdir(parents=True, exist_ok=True)
        # Per thread too: two children of one matrix may say the same answer at once.
        temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps(data))
        os.replace(temporary, path)


def machine_defaults(model: Path, configs: Sequence[Any], state_dir: Path) -> Machine:
    """What the unset knobs' defaults of ``configs`` depend on here (core/runtime_defaults):
    whether the model is a Keras model, and, only where a configuration's default depends on
    it, whether TensorFlow lists a GPU (no child where the machine has no GPU device files;
    the probe is remembered). A failed probe is one line naming TensorFlow."""
    # A SavedModel folder's own call, an artefact's own runtime: no Keras model.
    keras_model = not Path(model).is_dir() and artefact_format(model) is None
    if not keras_model or not any(needs_accelerator_answer(c) for c in configs):
        return Machine(keras_model=keras_model)
    return Machine(tensorflow_accelerator=bool(tensorflow_gpus(state_dir)))


def tensorflow_gpus(state_dir: Path) -> list[str]:
    """The GPUs TensorFlow sees (asked of a child, remembered per machine; none without a
    child where the machine has no GPU device files); a failed probe is one line."""
    if no_gpu_possible():
        return []
    try:
        return gpu_names(probe_devices(state_dir))
    except ProbeError as error:
        raise InputError("tensorflow", str(error)) from None


def no_gpu_possible() -> bool:
    """Whether no runtime can see a GPU here, by the device files and drivers alone: on
    Linux, CUDA needs ``/dev/nvidia0``… or a loaded driver (``/dev/dxg`` under WSL 2) and
    ROCm ``/dev/kfd``. A default matrix is then planned without asking a child, whose
    start-up (seconds of TensorFlow's import) would stand before the first map. Elsewhere
    (macOS's Metal plug-in) only a child can say."""
    if not sys.platform.startswith("linux"):
        return False
    dev = Path("/dev")
    # A loaded driver counts too: without udev, /dev/nvidia0 appears only when CUDA starts.
    drivers = ("/sys/module/nvidia", "/proc/driver/nvidia", "/sys/module/amdgpu")
    return not (
        any(dev.glob("nvidia[0-9]*"))
        or any(Path(path).exists() for path in (dev / "dxg", dev / "kfd", *drivers))
    )


def gpu_names(probe: dict[str, Any]) -> list[str]:
    return [d["name"] for d in probe.get("devices", []) if d.get("type") == "GPU"]


def build_text(facts: dict[str, Any]) -> str:
    """The runtime build a probe found, in one phrase both front ends show: ``TensorFlow
    2.17.0 (built for CUDA 12.3, cuDNN 8), Keras 3.5.0``."""
    runtime = RUNTIMES.get(str(facts.get("runtime", "tensorflow")), RUNTIMES["tensorflow"])
    version = recorded_version(facts)
    build = runtime.build(facts)
    return f"{runtime.family} {version} ({build}), Keras {facts.get('keras_version')}"


def _host() -> str:
    import socket  # here: only a device probe's state asks (2 ms of every start otherwise)

    return socket.gethostname()
