"""What a converter's refusal means, in one line: the op it refuses, the Keras layer it came
from, and why, read from the converters' own text (LiteRT's MLIR diagnostics, tf2onnx's log).

LiteRT's converter refuses an op it has no builtin kernel for, and also one it has a kernel for
but cannot lower because an input's shape is unknown (``tf.Conv2D(tensor<?x?x?x?xf32>, …)``:
a convolution must know its input channels). The second is said as such, with the shape: the
op is not the cause, the unknown shape is. Pure text: no converter is imported here.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from segdiff_gui.core.errors import InputError, first_line

__all__ = ["conversion_failure", "installed_version", "layer_name", "onnx_refusals"]

# The LiteRT converter: "'tf.Erfinv' op is neither a custom op nor a flex op", located at
# fused["Erfinv:", "functional_1/erfinv/Erfinv@__inference_function_92"].
_LITERT_UNSUPPORTED = re.compile(r"'tf\.(\w+)' op is neither a custom op nor a flex op")
_LITERT_LOCATION = re.compile(r'fused\["\w+:", "[^/"]+/([^"@]+)/\w+@')
# Its summary: "TF Select ops: Conv2D ... Details: tf.Conv2D(tensor<?x?x?x?xf32>, …) -> …".
_TENSOR_TYPE = re.compile(r"tensor<([^<>]*)>")
# tf2onnx: "Tensorflow op [functional_1/erfinv/Erfinv: Erfinv] is not supported".
_ONNX_UNSUPPORTED = re.compile(
    r"Tensorflow op \[[^/\]]+/([^\]]+)/[^/\]]+: (\w+)\] is not supported"
)


def installed_version(distribution: str) -> str:
    """A distribution's installed version ("" when it is not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def layer_name(scope: str) -> str:
    """The Keras layer of a TensorFlow name scope: ``bicubic_up_1/resize`` → ``bicubic_up``
    (the scope's first part, without the ``_1`` tracing adds; sub-scopes are the layer's
    own ops)."""
    return re.sub(r"_\d+$", "", scope.split("/", 1)[0])


def _unknown_operand(text: str, op: str) -> str:
    """The first input of the refused ``op`` whose shape the converter did not know beyond
    its batch, as ``?×?×?×?`` (``unknown rank`` for an unranked one); "" when every input's
    is known (a free batch alone, ``?×32×32×1``, is not the cause: LiteRT takes it)."""
    details = re.search(rf"\btf\.{op}\(([^)]*)\)", text)
    if details is None:
        return ""
    for tensor_type in _TENSOR_TYPE.findall(details.group(1)):
        dims = tensor_type.split("x")[:-1]  # the last part is the element type: f32
        if tensor_type.startswith("*"):
            return "unknown rank"
        if "?" in dims[1:]:
            return "×".join(dims)
    return ""


def _litert_failure(path: Path, text: str, op: str) -> InputError:
    where = _LITERT_LOCATION.search(text)
    layer = f" (layer {layer_name(where.group(1))})" if where else ""
    if unknown := _unknown_operand(text, op):
        return InputError(
            path,
            f"cannot be converted to LiteRT: op {op}{layer} is given an input of unknown shape "
            f"({unknown}), and LiteRT's builtin {op} needs it known (ai-edge-litert runs no "
            "Select TensorFlow ops, which would take it)",
        )
    return InputError(
        path,
        f"cannot be converted to LiteRT: op {op}{layer} has no LiteRT builtin kernel, and "
        "ai-edge-litert runs no Select TensorFlow ops",
    )


def conversion_failure(path: Path, target_format: str, text: str) -> InputError:
    """One line for a conversion to ``target_format`` ("litert" or "onnx") that failed with
    ``text`` (the exception's message and what the converter wrote)."""
    target = "LiteRT" if target_format == "litert" else "ONNX"
    if target_format == "litert" and (op := _LITERT_UNSUPPORTED.search(text)):
        return _litert_failure(path, text, op.group(1))
    if match := _ONNX_UNSUPPORTED.search(text):
        return InputError(
            path,
            f"cannot be converted to ONNX: op {match.group(2)} (layer "
            f"{layer_name(match.group(1))}) is not "
            f"supported by tf2onnx {installed_version('tf2onnx')}",
        )
    said = [line.strip() for line in text.splitlines() if "error:" in line]
    reason = said[0].split("error:", 1)[1].strip() if said else first_line(text)
    return InputError(path, f"cannot be converted to {target}: {reason[:300]}")


def onnx_refusals(messages: list[str]) -> list[str]:
    """The messages in which tf2onnx says an op is not supported (it logs them, and goes on)."""
    return [message for message in messages if _ONNX_UNSUPPORTED.search(message)]
