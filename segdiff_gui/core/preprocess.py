"""Image → model input: scaling (dividing, or multiplying), colour conversion on request,
resizing, normalisation; the steps and their order are :class:`Preprocessing`'s.

Pure numpy so that the same arithmetic runs wherever the engine runs, and is part of the key.
"""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.config import Preprocessing
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.text import shape_text

__all__ = [
    "dtype_divisor",
    "is_tensor",
    "prepare_input",
    "resize_bilinear",
    "scaled",
    "tensor_input",
]

# ITU-R BT.601 luma, the weights Pillow and tf.image.rgb_to_grayscale use.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def dtype_divisor(dtype: np.dtype) -> float | None:
    """255 for 8-bit, 65535 for 16-bit images; ``None`` (left as they are) for the others."""
    if dtype == np.uint8:
        return 255.0
    if dtype == np.uint16:
        return 65535.0
    return None


def scaled(image: np.ndarray, preprocessing: Preprocessing) -> np.ndarray:
    """Step 2 of :class:`Preprocessing`, in float32: ``x / divisor`` or ``x * scale``, or by
    the image's dtype (the arithmetic ``by_dtype`` says)."""
    data = image.astype(np.float32)
    if preprocessing.divisor is not None:
        return data / np.float32(preprocessing.divisor)
    if preprocessing.scale is not None:
        return data * np.float32(preprocessing.scale)
    divisor = dtype_divisor(image.dtype)
    if divisor is None:
        return data
    if preprocessing.by_dtype == "divide":
        return data / np.float32(divisor)
    return data * np.float32(1.0 / divisor)


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize with half-pixel centres (as ``tf.image.resize``), float32 H×W×C."""
    in_h, in_w = image.shape[:2]

    def axis(out_size: int, in_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        centres = (np.arange(out_size, dtype=np.float64) + 0.5) * (in_size / out_size) - 0.5
        centres = np.clip(centres, 0, in_size - 1)
        low = np.floor(centres).astype(np.intp)
        high = np.minimum(low + 1, in_size - 1)
        return low, high, (centres - low).astype(np.float32)

    y0, y1, fy = axis(height, in_h)
    x0, x1, fx = axis(width, in_w)
    fy, fx = fy[:, None, None], fx[None, :, None]
    top = image[y0][:, x0] * (1 - fx) + image[y0][:, x1] * fx
    bottom = image[y1][:, x0] * (1 - fx) + image[y1][:, x1] * fx
    resized: np.ndarray = (top * (1 - fy) + bottom * fy).astype(np.float32)
    return resized


def _convert_channels(image: np.ndarray, channels: int, color: str, name: str) -> np.ndarray:
    have = image.shape[-1]
    if color == "gray" and have in (3, 4):
        image = (image[..., :3] @ _LUMA)[..., None]
    elif color == "rgb" and have == 1:
        image = np.repeat(image, 3, axis=-1)
    elif color == "rgb" and have == 4:
        image = image[..., :3]
    if channels and image.shape[-1] != channels:
        wanted = {1: "gray", 3: "rgb"}.get(channels) if color == "keep" else None
        kind = "RGB" if wanted == "rgb" else "grayscale"
        hint = f"; it needs {kind} input (colour conversion)"
        raise InputError(
            name,
            f"model expects {channels} channel(s), image has {image.shape[-1]}"
            + (hint if wanted else ""),
            fix=f"color={wanted}" if wanted else "",
        )
    return image


def prepare_input(
    image: np.ndarray,
    preprocessing: Preprocessing,
    height: int | None,
    width: int | None,
    channels: int | None,
    name: str,
) -> np.ndarray:
    """Turn a decoded image (H×W or H×W×C, any dtype) into float32 H×W×C model input.

    ``height``/``width``/``channels`` are the model's expectations (``None`` where free).
    Raises :class:`InputError` naming ``name`` and both shapes on a mismatch.
    """
    data = scaled(image[..., None] if image.ndim == 2 else image, preprocessing)
    data = _convert_channels(data, channels or 0, preprocessing.color, name)
    want_h, want_w = height or data.shape[0], width or data.shape[1]
    if (want_h, want_w) != data.shape[:2]:
        if preprocessing.resize == "refuse":
            raise InputError(
                name,
                f"image is {data.shape[0]}×{data.shape[1]}×{data.shape[2]} but the model expects "
                f"{want_h}×{want_w}×{channels or data.shape[2]}; it needs resizing (bilinear)",
                fix="resize=bilinear",
            )
        data = resize_bilinear(data, want_h, want_w)
    for what, values in (("mean", preprocessing.mean), ("std", preprocessing.std)):
        if len(values) not in (0, 1, data.shape[-1]):
            raise InputError(
                name,
                f"the {what} has {len(values)} values but the model input has "
                f"{data.shape[-1]} channel(s); give 1"
                + (f" or {data.shape[-1]}" if data.shape[-1] > 1 else ""),
                fix=what,
            )
    if preprocessing.mean:
        data = data - np.asarray(preprocessing.mean, dtype=np.float32)
    if preprocessing.std:
        data = data / np.asarray(preprocessing.std, dtype=np.float32)
    return np.ascontiguousarray(data, dtype=np.float32)


def is_tensor(path: str, array: np.ndarray) -> bool:
    """A ``.npy`` of floats is the model's input already (a tensor), used as it is."""
    return path.lower().endswith(".npy") and array.dtype.kind == "f"


def tensor_input(
    array: np.ndarray,
    preprocessing: Preprocessing,
    height: int | None,
    width: int | None,
    channels: int | None,
    name: str,
) -> np.ndarray:
    """A tensor (:func:`is_tensor`) as the model's input: as it is, no scaling and no colour
    change; refused, naming the file, where it cannot be the model's input."""
    plain = Preprocessing(by_dtype=preprocessing.by_dtype)
    if preprocessing != plain:
        raise InputError(
            name,
            "is a tensor (a .npy of floats is the model's input as it is): it takes no "
            "divide, scale, mean, std, colour, resize or preprocessing function; drop them",
        )
    if array.dtype != np.float32:
        raise InputError(
            name, f"is a {array.dtype} tensor; the model's input is float32 (save it as float32)"
        )
    data = array[..., None] if array.ndim == 2 else array
    wanted = (height or data.shape[0], width or data.shape[1], channels or data.shape[-1])
    if data.shape != wanted:
        raise InputError(
            name,
            f"is a tensor of shape {shape_text(data.shape)}; the model takes "
            f"{shape_text(wanted)} (a .npy of floats is used as it is: not resized)",
        )
    if not np.isfinite(data).all():
        raise InputError(name, "is a tensor with NaN or infinite values")
    return np.ascontiguousarray(data)
