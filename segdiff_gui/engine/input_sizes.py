"""Which sizes a Keras model of free height and width takes.

A free size is not any size: a U-Net's skip connections join a map with one that pooling
halved and upsampling doubled, so its sides must be a multiple of 2 to the power of its depth
(200 rows, pooled four times, come back as 192 beside 200). Whether a size fits is asked of a
symbolic trace of the model's call (Keras's ``compute_output_spec``: shapes only, no forward
pass, a fraction of a second), and the nearest size it takes is searched among multiples of
2, 4, 8, … 128, each side rounded to the nearest (halves up), so that a size it cannot take
is said in one line with the size that works, and bilinear resizing resizes to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from segdiff_gui.core.errors import InputError, first_line
from segdiff_gui.core.text import shape_text

__all__ = ["SizeFit", "SizeRefused", "short_reason"]

# The multiples tried: 2**1 … 2**7 (a network of seven poolings).
_DEPTHS = range(1, 8)
_REASON_LIMIT = 220
# first_line's "reason (in Concatenate.call())": the layer's class, said as its layer.
_IN_LAYER = re.compile(r"^(?P<reason>.*) \(in (?P<layer>\w+)\.call\(\)\)$")


def short_reason(error: BaseException) -> str:
    """The trace's complaint in one short line: its first sentence, after the layer that
    made it (``its Concatenate layer: Dimension 1 in both shapes must be equal, but are 25
    and 24``), not TensorFlow's node and shapes that follow."""
    text = first_line(error, 2000) or type(error).__name__
    layer = ""
    if match := _IN_LAYER.match(text):
        text, layer = match["reason"], f"its {match['layer']} layer: "
    sentence = re.split(r"(?<=[^.])\.(?:\s|$)", text, maxsplit=1)[0]
    said = layer + sentence
    if len(said) <= _REASON_LIMIT:
        return said
    return said[:_REASON_LIMIT].rsplit(" ", 1)[0].rstrip(",:;") + "…"  # a word cut off


def _rounded(side: int, multiple: int) -> int:
    """``side`` to the nearest multiple of ``multiple`` (halves up), at least ``multiple``."""
    return max(multiple, (side + multiple // 2) // multiple * multiple)


def _below(side: int, multiple: int) -> int:
    return max(multiple, side // multiple * multiple)


def _above(side: int, multiple: int) -> int:
    return -(-side // multiple) * multiple


@dataclass(frozen=True)
class SizeRefused:
    """A size the model cannot take: its own reason in one short line, and the nearest size
    it takes with the multiple its sides are of."""

    height: int
    width: int
    channels: int
    reason: str
    nearest: tuple[int, int]
    multiple: int
    others: tuple[tuple[int, int], ...] = ()

    def error(self, path: str, resizable: bool = True) -> InputError:
        """The one line naming the image: what the model said, and the size that works (with
        bilinear resizing, the fix, where one was found and segdiff ``resizable`` the input:
        not a tensor, not the user's own function's)."""
        said = f"is {shape_text((self.height, self.width, self.channels))}, a size this model "
        said += f"cannot take ({self.reason})"
        sizes = " or ".join(shape_text(size) for size in (self.nearest, *self.others))
        said += f"; it takes {sizes} (sides a multiple of {self.multiple})"
        if not resizable:
            return InputError(path, said)
        resized = f"{said}: bilinear resizing resizes it to {shape_text(self.nearest)}"
        return InputError(path, resized, fix="resize=bilinear")


class SizeFit:
    """Asks a Keras model which sizes it takes, once per size (a child sees few sizes)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._said: dict[tuple[int, int, int], str] = {}

    def reason(self, height: int, width: int, channels: int) -> str:
        """``""`` if the model takes an input of this size, else its reason in one line."""
        key = (height, width, channels)
        if key not in self._said:
            model = self._model
            try:
                import keras  # the child's runtime, imported by now
                from keras.src import backend as keras_backend  # where Keras 3 keeps it

                keras_backend.compute_output_spec(
                    lambda batch: model(batch, training=False),
                    keras.KerasTensor((1, height, width, channels)),
                )
            except Exception as error:  # noqa: BLE001 - any failure of the trace is the size's
                self._said[key] = short_reason(error)
            else:
                self._said[key] = ""
        return self._said[key]

    def refused(self, height: int, width: int, channels: int) -> SizeRefused | None:
        """What the model said of this size, with the nearest size it takes (and the other
        nearby one of the same multiple, where it takes that too); ``None`` where it takes
        this size, and where no nearby size traces either: then the trace, not the size, is
        what fails (a layer without a symbolic form), and the forward pass decides."""
        reason = self.reason(height, width, channels)
        if not reason:
            return None
        for depth in _DEPTHS:
            multiple = 2**depth
            nearest = (_rounded(height, multiple), _rounded(width, multiple))
            if nearest == (height, width) or self.reason(*nearest, channels):
                continue
            # The other rounding of each side: 192×192 beside 208×208 for 200×200.
            other = tuple(
                _below(side, multiple) if near > side else _above(side, multiple)
                for side, near in zip((height, width), nearest, strict=True)
            )
            taken = other != nearest and not self.reason(other[0], other[1], channels)
            others = ((other[0], other[1]),) if taken else ()
            return SizeRefused(height, width, channels, reason, nearest, multiple, others)
        return None
