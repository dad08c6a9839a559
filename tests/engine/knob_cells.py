"""Every knob × every runtime, as cells: a knob's values other than its default, tried under
each runtime. A cell is refused before any child, in one line, or shown honoured by one of the
engine's real tests (``tests/engine/test_knobs.py``, ``test_runtimes.py``,
``test_converted_runtimes.py``): the map moved against the same configuration without it, or
the child read the setting back from its runtime (:func:`assert_honoured`). A few cells are
honoured by construction, each with its reason (:data:`BY_CONSTRUCTION`).
``tests/core/test_knob_cells.py`` holds the whole table to that; a knob or a runtime added to
the registry enters the table by itself, and fails it until a test shows its cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from segdiff_gui.core.config import RunConfig, parse_config_spec
from segdiff_gui.core.errors import ConfigError
from segdiff_gui.core.knobs import KNOBS
from segdiff_gui.core.runtimes import RUNTIME_NAMES, RUNTIMES

# Each knob's values other than its default, as ``--config`` writes them, with what a value
# needs beside it (a context or a position needs a batch of more than one image; layers kept
# in float32 need a mixed policy). The runtime knob is the table's other axis. A knob missing
# here fails tests/core/test_knob_cells.py.
SAMPLES: Mapping[str, tuple[str, ...]] = {
    "device": ("device=gpu:0",),
    "batch": ("batch=4",),
    "context": ("batch=4,context=copies",),
    "position": ("batch=4,position=2",),
    "determinism": ("determinism=on",),
    "tf32": ("tf32=off",),
    "onednn": ("onednn=off", "onednn=on"),
    "threads": ("threads=1",),
    "xla": ("xla=on", "xla=off"),
    "precision": ("precision=bf16", "precision=fp16", "precision=fp64"),
    "keep_float32": ("precision=bf16,keep_float32=foreground",),
    "inference_precision": ("inference_precision=f32", "inference_precision=bf16"),
    "xnnpack": ("xnnpack=off", "xnnpack=on"),
    "graph_optimization": ("graph_optimization=disable",),
    "emulate": ("emulate=tf32",),
    "repeat_scope": ("scope=fresh",),
}


def _stated(record: Any) -> dict[str, Any]:
    """Everything a run's provenance holds, the runtime's own facts included."""
    return record.provenance.to_dict()


# What a run's record says of a knob, as the child read it back from its runtime (or, for the
# batch's images, as it built the batch), and whether that is the value asked for.
READ_BACK: Mapping[str, Callable[[Any, Any], bool]] = {
    "batch": lambda r, value: _stated(r).get("input_batch_shape", [None])[0] == value,
    "context": lambda r, value: value == "copies" and set(r.batch_names) == {r.target_name},
    "position": lambda r, value: r.batch_names[value] == r.target_name,
    "precision": lambda r, value: value.removeprefix("mixed_") == _stated(r).get(
        "compute_dtype"
    ),
    "onednn": lambda r, value: _stated(r).get("onednn_enabled") is value,
    "determinism": lambda r, value: value in (
        _stated(r).get("op_determinism"), _stated(r).get("onnxruntime_deterministic_compute")
    ),
    "tf32": lambda r, value: _stated(r).get("tf32_enabled") is value,
    # OpenVINO's compiled model says what it infers in.
    "inference_precision": lambda r, value: _stated(r).get("inference_precision") == value,
    # JAX says how its forward pass ran: one jax.jit's compiled computation, or op by op.
    "xla": lambda r, value: _stated(r).get("placement", "").startswith(
        "one XLA computation" if value else "op by op"
    ),
    "threads": lambda r, value: value in (
        _stated(r).get("intra_op_threads"), _stated(r).get("litert_threads"),
        _stated(r).get("onnxruntime_threads"), _stated(r).get("openvino_threads"),
    ),
    # LiteRT's execution plan says whether XNNPACK took the graph; ONNX Runtime's session
    # its optimisation level.
    "xnnpack": lambda r, value: _stated(r).get("litert_xnnpack") is (value == "on"),
    "graph_optimization": lambda r, value: _stated(r).get(
        "onnxruntime_graph_optimization"
    ) == value,
}  # fmt: skip

_CONVERTED = tuple(name for name, runtime in RUNTIMES.items() if runtime.conversion)
# Cells whose value is what the runtime always does; the reason is what its refusal of the
# other value says.
BY_CONSTRUCTION: Mapping[tuple[str, str, Any], str] = {
    **{(name, "xla", False): "runs in its own kernels, never XLA" for name in _CONVERTED},
    ("torch", "xla", False): "Keras runs a torch model eagerly",
    ("openvino", "xla", False): "OpenVINO compiles the model itself",
    # tf32 acts on a GPU's matrix units only: a CPU run reads it back where the runtime
    # reports it (TensorFlow, JAX, PyTorch); ONNX Runtime sets it on its CUDA provider.
    ("onnxruntime", "tf32", False): "ONNX Runtime's TF32 is its CUDA provider's option",
}
# Knobs the run loop applies the same way under every runtime (which images fill the batch,
# and in which process a repeat runs): shown honoured under TensorFlow, accepted by each.
RUN_LOOPS_OWN = frozenset({"context", "position", "repeat_scope"})
# A GPU's cells are shown on a GPU only (tools/gpu_check.sh); here they are refused or planned.
NEEDS_GPU = frozenset({"device"})


@dataclass(frozen=True)
class Cell:
    runtime: str
    knob: str
    spec: str  # as --config writes it, the runtime included

    @property
    def config(self) -> RunConfig:
        return parse_config_spec(self.spec)


def cells() -> Iterator[Cell]:
    """Every runtime × every knob × each of the knob's sample values."""
    for runtime in RUNTIME_NAMES:
        prefix = "" if runtime == KNOBS.default("runtime") else f"runtime={runtime},"
        for knob in KNOBS:
            if knob.name != "runtime":
                for sample in SAMPLES[knob.name]:
                    yield Cell(runtime, knob.name, prefix + sample)


def moved(config: RunConfig) -> dict[str, Any]:
    """The knobs ``config`` sets away from their defaults (the runtime aside), with values."""
    return {
        f.name: getattr(config, f.name)
        for f in fields(config)
        if f.name != "runtime" and getattr(config, f.name) != f.default
    }


def without(config: RunConfig, knob: str) -> RunConfig | None:
    """``config`` with ``knob`` back at its default (keeping what it needed beside it), or
    None where another knob needs it (a position in a batch of four)."""
    try:
        return replace(config, **{knob: KNOBS.default(knob)})
    except ConfigError:
        return None


def shown(specs: Iterable[str]) -> set[tuple[str, str, Any]]:
    """The cells (runtime, knob, value) that running ``specs`` shows honoured: the spec's
    configuration without the knob is run too, or the child reads the knob back."""
    configs = [parse_config_spec(spec) for spec in specs]
    found = set()
    for config in configs:
        for knob, value in moved(config).items():
            plain = without(config, knob)
            if plain is not None and (knob in READ_BACK or plain in configs):
                found.add((config.runtime, knob, value))
    return found


def assert_honoured(specs: Mapping[str, str], records: Mapping[str, Any]) -> dict[str, str]:
    """For every knob each named spec moves: its map moved against the run without it, or
    the child read it back as asked. Returns how each (spec name and knob) was shown."""
    configs = {name: parse_config_spec(spec) for name, spec in specs.items()}
    how = {}
    for name, config in configs.items():
        for knob, value in moved(config).items():
            plain = without(config, knob)
            if plain is None:
                continue  # needed by another knob of the spec; a spec of its own shows it
            twin = next((n for n, c in configs.items() if c == plain), None)
            record = records[name]
            in_effect = _stated(records[twin]).get("defaults_in_effect", {}) if twin else {}
            if twin is not None and (
                record.probabilities.tobytes() != records[twin].probabilities.tobytes()
            ):
                how[f"{name}: {knob}"] = f"map moved from {twin}"
            elif in_effect.get(knob, KNOBS.default(knob)) == value:
                # left at its default, the knob resolved to this value: the same computation
                assert record.probabilities.tobytes() == records[twin].probabilities.tobytes()
                how[f"{name}: {knob}"] = f"{twin} ran so by default"
            elif knob in READ_BACK and READ_BACK[knob](record, value):
                how[f"{name}: {knob}"] = "read back"
            else:
                raise AssertionError(f"{name}: {knob}={value!r} shows no effect")
    return how
