"""TensorFloat-32 as an NVIDIA tensor core takes a float32 operand: 1 sign bit, 8 exponent
bits and 10 explicit mantissa bits, kept in a float32 whose 13 low mantissa bits are zero.

Which rounding. NVIDIA documents three ways a float32 becomes TF32:

- round to nearest, ties away from zero: PTX ``cvt.rna.tf32.f32``, the one conversion
  instruction Ampere (sm_80) has, and CUTLASS's choice for float32 operands of its TF32
  tensor-core GEMMs and convolutions (``PreferredRoundingMode<tfloat32_t, float>`` is
  ``round_half_ulp_truncate`` in ``cutlass/numeric_conversion.h``; ``tfloat32_t(float)``
  adds half a TF32 ULP, 0x1000, to the bits of a finite value and the tensor core drops the
  13 low bits: ``cutlass/tfloat32.h``);
- round to nearest, ties to even: ``cvt.rn.tf32.f32``, Hopper (sm_90) and later only, and
  CUTLASS's ``NumericConverter<tfloat32_t, float, round_to_nearest>``; the simulation in
  TensorFlow PR 127577 (which reproduced issue 127346's GPU error to two digits) used it;
- truncation: a float32 handed to ``mma.sync`` as a ``.tf32`` operand without a conversion
  (the tensor core ignores the 13 low bits), what Triton did before it learned to round.

cuBLAS and cuDNN do not say which they use. segdiff emulates the first: it is what the
hardware offers on every TF32 GPU and what NVIDIA's own kernel library does. The two nearest
roundings differ only on exact ties (13 low bits exactly 0x1000, one value in 8,192), far
below what moves a map; truncation has twice the error and a bias toward zero.

A subnormal rounds by the same bit arithmetic (TF32 keeps float32's exponent range and its
subnormals), a finite value that rounds past the largest TF32 number becomes infinity,
infinities stay, and a NaN stays a NaN (quiet, its sign and upper payload kept): dropping
the low bits alone could turn a NaN whose payload lies there into an infinity.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segdiff_gui.core.errors import InputError

__all__ = [
    "EXPONENT_BITS",
    "HALF_ULP",
    "KEPT_BITS",
    "QUIET_NAN_BIT",
    "ROUNDING",
    "TF32_MANTISSA_BITS",
    "saved_model_refuses_emulation",
    "signed",
    "to_tf32",
]

TF32_MANTISSA_BITS = 10
_DROPPED_BITS = 23 - TF32_MANTISSA_BITS  # 13
EXPONENT_BITS = 0x7F800000  # all ones: an infinity or a NaN
HALF_ULP = 1 << (_DROPPED_BITS - 1)  # 0x1000: half of TF32's last place, in float32's bits
KEPT_BITS = (0xFFFFFFFF << _DROPPED_BITS) & 0xFFFFFFFF  # 0xFFFFE000
QUIET_NAN_BIT = 0x00400000  # the top mantissa bit: kept by TF32, marks a quiet NaN
# In sentences (provenance, the knob's tooltip): the rounding this module does.
ROUNDING = "round to nearest, ties away from zero, as cvt.rna.tf32.f32 and CUTLASS do"


def saved_model_refuses_emulation(model: str | Path, emulate: str) -> InputError:
    """Why a SavedModel takes no emulation: the runner says it before any child starts, the
    TensorFlow backend (where planning was passed by) in the same words."""
    return InputError(
        model,
        f"emulate={emulate} rounds a Keras model's convolutions and matrix multiplies; a "
        "SavedModel's graph calls TensorFlow's kernels itself (a .keras or .h5 model)",
    )


def signed(bits: int) -> int:
    """A 32-bit pattern as the int32 a runtime's bitwise ops take (0xFFFFE000 → -8192)."""
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def to_tf32(values: np.ndarray) -> np.ndarray:
    """``values`` (float32) rounded to TF32, as float32 with the 13 low mantissa bits zero:
    round to nearest, ties away from zero (see the module's docstring)."""
    array = np.asarray(values)
    if array.dtype != np.float32:
        raise TypeError(f"TF32 rounds float32 values, not {array.dtype}")
    bits = array.view(np.uint32)
    finite = (bits & np.uint32(EXPONENT_BITS)) != np.uint32(EXPONENT_BITS)
    # Sign and magnitude: adding half a ULP to the magnitude's bits rounds it half away from
    # zero, a carry into the exponent included (up to infinity past the largest TF32 value).
    rounded = np.where(finite, bits + np.uint32(HALF_ULP), bits) & np.uint32(KEPT_BITS)
    nan = ~finite & ((bits & np.uint32(0x007FFFFF)) != 0)
    rounded = np.where(nan, rounded | np.uint32(QUIET_NAN_BIT), rounded)
    return np.asarray(rounded, dtype=np.uint32).view(np.float32)
