"""One schema for a stored run's attributes: every value's type and range is checked when a run
is read, from a cache or from a bundle, so that a crafted or damaged attribute is one line
naming the file and the attribute, never a traceback somewhere downstream.

Reading is defensive in three ways: an attribute's stored size is bounded before it is read
(a crafted attribute can be gigabytes), JSON is parsed only from text under that bound and
nesting too deep for the parser is damage, and each value must have the one type segdiff
writes (an integer where an integer belongs, a list of 64-hex digests for the batch …).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any, TypeVar, get_args, get_type_hints

import h5py
import numpy as np

from segdiff_gui.core.config import ConfigError, OutputSelection, Preprocessing, RunConfig
from segdiff_gui.core.limits import MAX_BATCH, MAX_CHANNELS, MAX_NAME_CHARS, over_text_bound
from segdiff_gui.storage.hdf5_access import UnreadableEntry, h5py_damage

__all__ = [
    "AttributeReader",
    "check_config",
    "check_digest_list",
    "check_map_shape",
    "check_names",
    "check_output",
    "check_preprocessing",
    "check_raw_shape",
    "is_digest",
]

_DIGEST = re.compile("[0-9a-f]{64}")
_Built = TypeVar("_Built")
MAX_ATTRIBUTES = 256


def is_digest(value: object) -> bool:
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


class AttributeReader:
    """Typed, bounded reads of one HDF5 object's attributes; errors name ``where`` and the
    attribute.

    Every attribute is read once, up front: an attribute's bytes are stored whole in the file
    (HDF5 neither compresses nor chunks them), so none can be larger than the file itself, and
    each value's size is checked before it is parsed. One that HDF5 cannot read is remembered
    as unreadable, and refused only if it is asked for.
    """

    def __init__(self, stored: h5py.HLObject | dict[str, Any], where: str, owner: str) -> None:
        """``stored``: an HDF5 object, or the attributes a writer said it stored (JSON values,
        taken as HDF5 gives them back: numbers and truth values as numpy scalars)."""
        self.where = where
        self.owner = owner  # the group's name inside the file, for the message
        self._values: dict[str, Any] = {}
        self._unreadable: dict[str, str] = {}
        if isinstance(stored, dict):
            self._check_count(len(stored))
            self._values = {name: _as_stored(value) for name, value in stored.items()}
            return
        with h5py_damage(stored, where, f"the attributes of {owner}"):
            attrs = stored.attrs
            self._check_count(len(attrs))  # from the object header, before any is read
            names = list(attrs)
        for name in names:
            if not isinstance(name, str):  # h5py gives a name that is not UTF-8 as bytes
                raise UnreadableEntry(where, f"{owner} has an attribute whose name is not text")
            try:
                self._values[name] = attrs[name]
            except Exception as error:  # noqa: BLE001 - h5py fails in many ways on odd types
                self._unreadable[name] = type(error).__name__

    def _check_count(self, count: int) -> None:
        """No more attributes than segdiff writes: no CPU bomb of a million of them."""
        if count > MAX_ATTRIBUTES:
            raise UnreadableEntry(
                self.where, f"{self.owner} holds {count:,} attributes (segdiff writes <100)"
            )

    def fail(self, name: str, problem: str) -> UnreadableEntry:
        return UnreadableEntry(self.where, f"{self.owner} attribute {name!r} {problem}")

    def names(self) -> list[str]:
        return [*self._values, *self._unreadable]

    def raw(self, name: str) -> Any:
        if name in self._unreadable:
            raise self.fail(name, f"cannot be read ({self._unreadable[name]})")
        if name not in self._values:
            raise self.fail(name, "is missing")
        return self._values[name]

    def text(self, name: str) -> str:
        value = self.raw(name)
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail(name, "is not UTF-8 text") from None
        if not isinstance(value, str):
            raise self.fail(name, f"is {_kind(value)} where text belongs")
        # A variable-length string's size is known only once read (it is no larger than the
        # file, whose bytes are real): past the bound it is refused before it is parsed.
        if over_text_bound(value):
            raise self.fail(name, f"is {len(value):,} characters (more than segdiff ever writes)")
        if not _is_utf8(value):
            raise self.fail(name, "holds characters that are not text (lone surrogates)")
        return value

    def integer(self, name: str, low: int, high: int) -> int:
        value = self.raw(name)
        if isinstance(value, np.integer) and value.ndim == 0:
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(name, f"is {_kind(value)} where a whole number belongs")
        if not low <= value <= high:
            raise self.fail(name, f"is {value}, outside {low}..{high}")
        return value

    def digest(self, name: str) -> str:
        value = self.text(name)
        if not is_digest(value):
            raise self.fail(name, "is not a SHA-256 digest (64 hex digits)")
        return value

    def json(self, name: str) -> Any:
        text = self.text(name)
        try:
            value = json.loads(text)
            # "\\udcff" escapes decode to lone surrogates, which no writer can encode again;
            # a text without escapes or deep nesting (most: a run has dozens) holds none.
            encodable = _plain_json(text) or _is_utf8(json.dumps(value, ensure_ascii=False))
        except RecursionError:
            raise self.fail(name, "nests too deeply") from None
        except ValueError:
            raise self.fail(name, "is not valid JSON") from None
        if not encodable:
            raise self.fail(name, "holds characters that are not text (lone surrogates)")
        return value


def _plain_json(text: str) -> bool:
    """Whether JSON ``text`` has no escape that decodes to a lone surrogate and nests too
    little to be refused when written again."""
    return "\\u" not in text and text.count("[") + text.count("{") < 64


def _as_stored(value: Any) -> Any:
    """A JSON value as h5py reads it back from an attribute: bool, int and float as numpy
    scalars; text as it is; anything else left for the typed reads to refuse."""
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    return value


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype} {tuple(value.shape)}"
    return f"a {type(value).__name__}"


@cache
def _stored_types() -> dict[str, type]:
    """Each knob's stored type. A knob whose default is the runtime's own (None) is stored
    only when set, as its field's other type: on or off (bool), a named value (str)."""
    hints = get_type_hints(RunConfig)
    types: dict[str, type] = {}
    for f in fields(RunConfig):
        if f.default is None:
            (kind,) = (arg for arg in get_args(hints[f.name]) if arg is not type(None))
            types[f.name] = kind
        else:
            types[f.name] = type(f.default)
    return types


def check_config(data: object, fail: Any) -> RunConfig:
    """A stored configuration: a dict of known knobs, each of its knob's type."""
    if not isinstance(data, dict):
        raise fail(f"is {_kind(data)}, not a configuration")
    types = _stored_types()
    for name, value in data.items():
        if name not in types:
            raise fail(f"names an unknown knob {str(name)[:40]!r}")
        wanted = types[name]
        if wanted is tuple and isinstance(value, list):  # names, stored as a JSON list
            continue  # their knob checks each (check_layer_names)
        if type(value) is not wanted:  # bool is an int: compare exactly
            raise fail(f"gives {name} as {_kind(value)}, not a {wanted.__name__}")
    if data.get("batch", 1) > MAX_BATCH or data.get("threads", 0) > 4096:
        raise fail("gives a batch or thread count beyond segdiff's bounds")
    return _built(RunConfig.from_dict, data, "configuration", fail)


def _built(factory: Callable[[dict[str, Any]], _Built], data: dict[str, Any], what: str,
           fail: Any) -> _Built:  # fmt: skip
    """The value ``factory`` makes of checked ``data``; its own refusal names the attribute."""
    try:
        return factory(data)
    except ConfigError as error:
        raise fail(f"is not a valid {what}: {error}") from None


def _finite_numbers(value: object, most: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= most
        and all(
            type(v) in (int, float) and math.isfinite(v)  # noqa: E721 - bool is no number
            for v in value
        )
    )


def check_preprocessing(data: object, fail: Any) -> Preprocessing:
    if isinstance(data, dict) and "function" in data:  # the user's own function
        if set(data) != {"function", "function_sha256"} or not all(
            isinstance(value, str) and len(value) <= 512 for value in data.values()
        ):
            raise fail("is not a preprocessing function (function, function_sha256)")
        return _built(Preprocessing.from_dict, data, "preprocessing", fail)
    known = {"scale", "mean", "std", "color", "resize", "divisor", "by_dtype"}
    if not isinstance(data, dict) or set(data) - known:
        raise fail(f"is not a preprocessing ({', '.join(sorted(known))})")
    for name in ("scale", "divisor"):
        value = data.get(name)
        if value is not None and not (
            type(value) in (int, float) and math.isfinite(value) and value > 0  # noqa: E721
        ):
            raise fail(f"gives a {name} that is not a positive finite number")
    for name in ("mean", "std"):
        if not _finite_numbers(data.get(name, []), 4):
            raise fail(f"gives a {name} that is not up to four finite numbers")
    if not all(isinstance(data.get(name, ""), str) for name in ("color", "resize", "by_dtype")):
        raise fail("gives a color, resize or by_dtype that is not text")
    return _built(Preprocessing.from_dict, data, "preprocessing", fail)


def check_output(data: object, fail: Any) -> OutputSelection:
    if not isinstance(data, dict) or set(data) - {"output", "activation"}:
        raise fail("is not an output selection (output, activation)")
    if not isinstance(data.get("output"), str | None) or not isinstance(
        data.get("activation", "none"), str
    ):
        raise fail("gives an output or activation that is not text")
    return _built(OutputSelection.from_dict, data, "output selection", fail)


def check_digest_list(data: object, length: int, fail: Any, shorter: bool = False) -> list[str]:
    """A list of ``length`` SHA-256 digests (with ``shorter``: 1 to ``length``, a sweep's
    last batch)."""
    lengths = range(1, length + 1) if shorter else range(length, length + 1)
    if isinstance(data, list) and len(data) in lengths and all(map(is_digest, data)):
        return data
    wanted = f"1 to {length}" if shorter else f"{length}"
    raise fail(f"is not a list of {wanted} SHA-256 digests")


def check_names(data: object, length: int, fail: Any) -> None:
    """The batch's image names: one bounded text each (made printable where shown)."""
    if not isinstance(data, list) or len(data) != length:
        raise fail(f"is not a list of {length} names")
    if not all(isinstance(name, str) and len(name) <= MAX_NAME_CHARS for name in data):
        raise fail("holds something other than names")


def check_raw_shape(
    data: object, batch: int, map_shape: tuple[int, ...], kind: str, fail: Any
) -> list[int | None]:
    """The model's raw output shape (batch × H × W × C) must agree with the stored map."""
    if not isinstance(data, list) or len(data) != 4:
        raise fail("is not a shape of four dimensions (batch, height, width, channels)")
    if not all(type(d) is int and d >= 0 for d in data):
        raise fail("holds something other than sizes")
    channels = 1 if kind == "sigmoid" else (map_shape[2] if len(map_shape) == 3 else -1)
    if data != [batch, *map_shape[:2], channels]:
        raise fail(
            f"is {data}, which does not agree with the stored {kind} map "
            f"{list(map_shape)} of a batch of {batch}"
        )
    return data


def check_map_shape(
    shape: tuple[int, ...], dtype: np.dtype, config: RunConfig, kind: str, fail: Any
) -> tuple[int, ...]:
    """What a sigmoid (H×W) or softmax (H×W×C) map's dataset of a run of ``config`` must
    declare, before reading: its values of the configuration's map dtype, little-endian
    float32, or float64 for the exact reference (and only for it)."""
    wanted_dtype = config.map_dtype
    if dtype != wanted_dtype:
        raise fail(
            f"holds {dtype.str} values; segdiff stores a {config.precision} run's map as "
            f"little-endian {wanted_dtype.name}"
        )
    wanted = 2 if kind == "sigmoid" else 3
    if len(shape) != wanted or any(n < 1 for n in shape):
        raise fail(f"has shape {list(shape)}; a {kind} map is {'H×W' if wanted == 2 else 'H×W×C'}")
    if kind == "softmax" and not 2 <= shape[2] <= MAX_CHANNELS:
        raise fail(f"has {shape[2]} classes (2..{MAX_CHANNELS} expected)")
    return shape
