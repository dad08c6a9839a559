"""What one finished run is, and how it sits in an HDF5 group.

The same group layout serves a cache entry file (its root group) and a run inside a bundle
(``/runs/<key>``), so moving results between machines never re-encodes them.

A run is read as untrusted data (see :mod:`segdiff_gui.storage.schema`) and must be
self-consistent: its key is recomputed from its own recorded inputs, its map's shape must agree
with the model output it records, and a checksum covers the map's bytes and every attribute,
so damage anywhere in the file is caught when it is read. Its label is derived from its
configuration, never taken from the file.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import h5py
import numpy as np

from segdiff_gui.core.artefacts import beside_source
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.environment import keyed_environment
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json, hash_bytes, imported_map_digest, run_key
from segdiff_gui.core.limits import (
    MAX_REPEATS,
    MAX_TEXT_BYTES,
    check_stored_bytes,
    over_text_bound,
)
from segdiff_gui.core.text import printable
from segdiff_gui.storage.chunked_read import read_stored_array
from segdiff_gui.storage.chunked_write import write_compressed
from segdiff_gui.storage.hdf5_access import (
    UnreadableEntry,
    plain_dataset,
    plain_group,
    write_attributes,
)
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.schema import (
    MAX_ATTRIBUTES,
    AttributeReader,
    check_config,
    check_digest_list,
    check_map_shape,
    check_names,
    check_output,
    check_preprocessing,
    check_raw_shape,
    is_digest,
)

try:  # ISA-L's CRC-32 runs at memory speed (12 GB/s here, zlib's 3.4): same value
    from isal.isal_zlib import crc32
except ImportError:
    crc32 = zlib.crc32

__all__ = [
    "FORMAT_VERSION",
    "RunRecord",
    "array_checksum",
    "check_readable_back",
    "derived_label",
    "expected_key",
    "read_checked_map",
    "with_checked_map",
    "StoredAttributes",
    "metadata_of_written",
    "read_metadata",
    "read_record",
    "write_record",
]

FORMAT_VERSION = 1
_MAP = "probabilities"
_PROVENANCE = "provenance"
_ENCODED = "_json_encoded"
_CHECKSUM = "checksum"
_JSON_ATTRS = (
    "config",
    "preprocessing",
    "output",
    "batch_hashes",
    "batch_names",
    "raw_output_shape",
)
# A sweep's run only: where its target sits in its batch (an integer attribute).
_BATCH_POSITION = "batch_position"
_TEXT_ATTRS = (
    "key",
    "label",
    "model_name",
    "model_hash",
    "target_name",
    "target_hash",
    "output_name",
    "kind",
)


@dataclass(frozen=True)
class RunRecord:
    """One run's result and everything needed to tell where it came from.

    ``probabilities`` is H×W (one sigmoid channel) or H×W×C (softmax) of the configuration's
    :attr:`~segdiff_gui.core.config.RunConfig.map_dtype` (float32; float64 for the exact
    reference), or ``None`` when only the metadata was read. ``kind`` is ``sigmoid`` or
    ``softmax``.
    """

    key: str
    label: str
    config: dict[str, Any]
    repeat: int
    model_name: str
    model_hash: str
    target_name: str
    target_hash: str
    batch_hashes: list[str]
    batch_names: list[str]
    preprocessing: dict[str, Any]
    output: dict[str, Any]
    output_name: str
    kind: str
    raw_output_shape: list[int | None]
    map_shape: tuple[int, ...]
    provenance: Provenance = field(default_factory=Provenance)
    probabilities: np.ndarray | None = field(default=None, repr=False, compare=False)
    # A sweep's run: its batch is the set's consecutive images (the last one short, as
    # ``predict`` cuts them) and its target sits here; None: the configuration's position.
    batch_position: int | None = None

    @cached_property
    def run_config(self) -> RunConfig:
        """The configuration, checked and typed once (a sweep's summaries ask it often)."""
        return RunConfig.from_dict(self.config)

    @property
    def position(self) -> int:
        """Where the target sat in its batch."""
        if self.batch_position is not None:
            return self.batch_position
        return int(self.config.get("position", 0))

    @property
    def short_id(self) -> str:
        return self.key[:8]

    @property
    def configuration(self) -> str:
        """The configuration's label (the run's label without its repeat), for display and
        for naming a configuration (``sweep --ref 'cpu b1'``)."""
        return configuration_label(self.run_config, self.provenance, self.model_name)

    @property
    def study_model_hash(self) -> str:
        """The model whose study the run is in: its own, or, for an artefact's run beside its
        Keras source, the source's (the two are one group)."""
        source = self.provenance.source
        return source.sha256 if source is not None else self.model_hash

    @property
    def study_model_name(self) -> str:
        """The file name of :attr:`study_model_hash`'s model."""
        source = self.provenance.source
        return printable(source.name) if source is not None else self.model_name


# identity ----------------------------------------------------------------------------------
def expected_key(record: RunRecord) -> str:
    """The key the run's own recorded inputs give: the planner's :func:`run_key` of them.

    The numerics-changing variables that are part of the key reached the child unchanged, so
    the child's recorded environment gives them back.
    """
    provenance = record.provenance
    return run_key(
        model_hash=record.model_hash,
        target_hash=record.target_hash,
        batch_hashes=list(record.batch_hashes),
        preprocessing=record.preprocessing,
        output=record.output,
        config=record.config,
        repeat=record.repeat,
        environment=keyed_environment(provenance.environment),
        calibration=provenance.calibration_hashes,
        defaults_in_effect=provenance.defaults_in_effect.to_dict(),
        imported=provenance.imported_digest or None,
        batch_position=record.batch_position,
        source=provenance.source.sha256 if provenance.source else None,
    )


def elsewhere_key(key: str, record: RunRecord) -> str:
    """The key a run from another machine is kept under beside this machine's run ``key``."""
    return hash_bytes(f"{key}:{record.provenance.machine}".encode())


def configuration_label(config: RunConfig, provenance: Provenance, model_name: str = "") -> str:
    """``cpu b64``; a run kept beside this machine's is named with its host; a full-int8
    run with its calibration set (``litert-int8 cpu b1 cal16#3fa2``); an OpenVINO run left at
    its default with the precision its compiled model reported (``openvino cpu b1 bf16``:
    the CPU chose it, and ``infer-bf16`` is a run that asked for it); an artefact's run
    beside its Keras source with the artefact's file name, ``model_name``
    (``int8.tflite litert cpu b1``)."""
    if (stated := provenance.imported) is not None:
        return f"imported: {printable(stated.label)[:80]}"
    label = config.label()
    if tag := provenance.calibration_tag:
        label = f"{label} {tag}"
    if config.inference_precision is None and (precision := provenance.inference_precision):
        label = f"{label} {precision}"
    if provenance.source is not None:
        label = beside_source(model_name, label)
    if provenance.merged_from_key is not None:
        host = provenance.hostname or "elsewhere"
        return f"{printable(host)}: {label}"
    return label


def batch_id(record: RunRecord) -> str:
    """What the run's batch held, as a value: the digest of its images' hashes in order (the
    target's position included). Runs whose batches differ are never repeats of one
    another, whatever their configuration says."""
    return hash_bytes(canonical_json(list(record.batch_hashes)).encode())


def batch_tag(record: RunRecord) -> str:
    """``6img#a3f2``: how many distinct images the batch held and a digest of which, in
    order; what tells apart in a label two runs of one configuration with other batches."""
    return f"{len(set(record.batch_hashes))}img#{batch_id(record)[:4]}"


def derived_label(
    config: RunConfig, repeat: int, provenance: Provenance, model_name: str = ""
) -> str:
    """``cpu b64 r1``: the configuration's label and the repeat."""
    return f"{configuration_label(config, provenance, model_name)} r{repeat}"


# checksum ----------------------------------------------------------------------------------
def _metadata(record: RunRecord) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in (*_TEXT_ATTRS, *_JSON_ATTRS)}
    values.update(repeat=record.repeat, map_shape=list(record.map_shape))
    values["provenance"] = dict(record.provenance.attributes)  # read only: summed
    if record.batch_position is not None:  # absent from the runs of one target: their sums stay
        values["batch_position"] = record.batch_position
    return values


def _metadata_digest(record: RunRecord) -> str:
    return hashlib.sha256(canonical_json(_metadata(record)).encode()).hexdigest()


def array_checksum(values: np.ndarray) -> int:
    """CRC-32 of an array's bytes as stored (C order)."""
    contiguous = np.ascontiguousarray(values)
    return int(crc32(contiguous.view(np.uint8).reshape(-1).data))


# writing -----------------------------------------------------------------------------------
def _stored_texts(record: RunRecord) -> dict[str, str]:
    """The run's text attributes as they are stored (JSON ones as their text)."""
    texts = {name: getattr(record, name) for name in _TEXT_ATTRS}
    texts.update({name: canonical_json(getattr(record, name)) for name in _JSON_ATTRS})
    return texts


def _stored_provenance(record: RunRecord) -> dict[str, str | int | float]:
    """The provenance's attributes as they are stored: text and numbers as they are, lists
    and dicts as JSON text, named in ``_json_encoded`` so reading gives them back as they
    were."""
    stored: dict[str, str | int | float] = {}
    encoded = []
    for name, value in record.provenance.attributes.items():
        if isinstance(value, str):
            stored[name] = str(value)  # a subclass (torch's version) is no text to h5py
        elif isinstance(value, float) or (isinstance(value, int) and -(2**63) <= value < 2**63):
            stored[name] = value
        else:
            stored[name] = canonical_json(value)
            encoded.append(name)
    # In name order, as reading gives them back: a run read and written again (a bundle, a
    # merge) keeps every attribute as it was, this one too.
    stored[_ENCODED] = canonical_json(sorted(encoded))
    return stored


def check_readable_back(record: RunRecord, where: object) -> None:
    """Refuse, in one line naming ``where``, a run its readers would refuse: an attribute
    past the text bound as it is written (JSON escaped), or more provenance attributes than
    a reader takes. What :func:`write_record` checks before it writes; a writer of several
    runs checks each first, so that none is stored unless all can be."""
    _check_readable_back(_stored_texts(record), _stored_provenance(record), where)


def _check_readable_back(
    texts: dict[str, str], provenance: dict[str, str | int | float], where: object
) -> None:
    if len(provenance) > MAX_ATTRIBUTES:
        raise InputError(
            where, f"its provenance would hold {len(provenance):,} attributes, over the "
            f"{MAX_ATTRIBUTES:,} segdiff reads",
        )  # fmt: skip
    for owner, values in (("", texts), ("provenance ", provenance)):
        for name, value in values.items():
            if isinstance(value, str) and over_text_bound(value):
                raise InputError(
                    where,
                    f"its {owner}attribute {printable(name)[:40]!r} would be stored as "
                    f"{len(value):,} characters, over segdiff's bound of {MAX_TEXT_BYTES:,} "
                    "for one attribute",
                )


@dataclass(frozen=True)
class StoredAttributes:
    """What :func:`write_record` stores beside the map, as HDF5 holds it: the run's
    attributes, its provenance's, and the map's shape and type. A child that wrote a run says
    it with the run's file (:class:`WrittenRun`), so that the runner need not read it back."""

    run: dict[str, Any]
    provenance: dict[str, Any]
    map_shape: tuple[int, ...]
    map_dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "provenance": self.provenance,
            "map_shape": list(self.map_shape),
            "map_dtype": self.map_dtype,
        }

    @classmethod
    def from_dict(cls, data: Any) -> StoredAttributes | None:
        """The attributes a child said it stored, or None where they are not such a thing
        (their values are checked as a file's are, by :func:`metadata_of_written`)."""
        if not isinstance(data, dict):
            return None
        run, provenance = data.get("run"), data.get("provenance")
        shape, dtype = data.get("map_shape"), data.get("map_dtype")
        if not (isinstance(run, dict) and isinstance(provenance, dict)):
            return None
        if not isinstance(shape, list) or not all(type(n) is int for n in shape):
            return None
        if not isinstance(dtype, str):
            return None
        return cls(run, provenance, tuple(shape), dtype)


def write_record(group: h5py.Group, record: RunRecord, where: object = "") -> StoredAttributes:
    """Write ``record`` (which must carry its map) into an empty group, once every attribute
    is known to be readable back (:func:`check_readable_back`: ``where`` names the file);
    return what it stored beside the map."""
    if record.probabilities is None:
        raise ValueError("a record needs its probability map to be written")
    dtype = record.run_config.map_dtype
    if record.probabilities.dtype != dtype:  # never rounded, never widened on the way
        raise ValueError(
            f"a {record.run_config.precision} run's map is {dtype.name}, not "
            f"{record.probabilities.dtype.name}"
        )
    # gzip+shuffle is lossless and readable by every HDF5 build (no plugin needed elsewhere);
    # deflated by ISA-L here, a few times faster than HDF5's own zlib (a sweep writes
    # thousands of maps).
    data = np.ascontiguousarray(record.probabilities, dtype=dtype)
    stored_dtype = dtype.newbyteorder("<").str
    write_compressed(group, _MAP, data, stored_dtype)
    texts, provenance_attributes = _stored_texts(record), _stored_provenance(record)
    _check_readable_back(texts, provenance_attributes, where)
    run: dict[str, Any] = {"format_version": FORMAT_VERSION, "repeat": record.repeat}
    if record.batch_position is not None:
        run[_BATCH_POSITION] = record.batch_position
    run.update(texts)
    run[_CHECKSUM] = canonical_json(
        {"map_crc32": array_checksum(data), "metadata_sha256": _metadata_digest(record)}
    )
    write_attributes(group, run)
    write_attributes(group.create_group(_PROVENANCE), provenance_attributes)
    return StoredAttributes(run, provenance_attributes, data.shape, stored_dtype)


# reading -----------------------------------------------------------------------------------
def read_record(group: h5py.Group, where: str, with_map: bool = True) -> RunRecord:
    """Read and check a record written by :func:`write_record`; ``with_map=False`` skips the
    pixels. Anything wrong is an :class:`UnreadableEntry` naming ``where`` and what."""
    record, map_crc32 = read_metadata(group, where)
    if not with_map:
        return record
    return with_checked_map(record, group, where, map_crc32)


def with_checked_map(
    record: RunRecord, group: h5py.Group, where: str, map_crc32: int | None
) -> RunRecord:
    """``record`` with its map, checked against its checksum and, for an imported map,
    against the digest its key was made from."""
    probabilities = read_checked_map(group, where, map_crc32)
    if probabilities.dtype != (wanted := record.run_config.map_dtype):
        raise UnreadableEntry(
            where, f"run {record.key[:16]}'s map is {probabilities.dtype.name}, not {wanted.name}"
        )
    digest = record.provenance.imported_digest
    if digest and imported_map_digest(probabilities) != digest:
        raise UnreadableEntry(
            where, f"run {record.key[:16]}'s imported map does not match its recorded digest"
        )
    return replace(record, probabilities=probabilities)


def read_checked_map(group: h5py.Group, where: str, map_crc32: int | None) -> np.ndarray:
    """The run's map, checked against its checksum (``None``: written before checksums)."""
    probabilities = read_stored_array(plain_dataset(group, _MAP, where), where)
    if map_crc32 is not None and array_checksum(probabilities) != map_crc32:
        raise UnreadableEntry(where, f"run {group.name}'s map does not match its checksum")
    return probabilities


def read_metadata(group: h5py.Group, where: str) -> tuple[RunRecord, int | None]:
    """The run without its map, every attribute checked; and its map's checksum."""

    def map_layout() -> tuple[tuple[int, ...], np.dtype[Any]]:
        dataset = plain_dataset(group, _MAP, where)
        return tuple(dataset.shape), dataset.dtype

    return _checked_metadata(
        AttributeReader(group, where, f"run {group.name}"),
        lambda: AttributeReader(plain_group(group, _PROVENANCE, where), where, "provenance"),
        map_layout,
        where,
        str(group.name),
    )


def metadata_of_written(stored: StoredAttributes, where: str) -> tuple[RunRecord, int | None]:
    """What :func:`read_metadata` gives of the file a writer said it stored as ``stored``,
    every attribute checked as the file's would be; :class:`UnreadableEntry` where one is
    wrong."""

    def map_layout() -> tuple[tuple[int, ...], np.dtype[Any]]:
        try:
            return stored.map_shape, np.dtype(stored.map_dtype)
        except (TypeError, ValueError):
            raise UnreadableEntry(where, "its map's type is not a number type") from None

    return _checked_metadata(
        AttributeReader(stored.run, where, "run /"),
        lambda: AttributeReader(stored.provenance, where, "provenance"),
        map_layout,
        where,
        "/",
    )


def _checked_metadata(
    attrs: AttributeReader,
    provenance_attrs: Callable[[], AttributeReader],
    map_layout: Callable[[], tuple[tuple[int, ...], np.dtype[Any]]],
    where: str,
    name: str,
) -> tuple[RunRecord, int | None]:
    version = attrs.integer("format_version", 0, 2**31)
    if version != FORMAT_VERSION:
        raise UnreadableEntry(
            where, f"run format {version} is not the supported format {FORMAT_VERSION}"
        )
    kind = attrs.text("kind")
    if kind not in ("sigmoid", "softmax"):
        raise attrs.fail("kind", f"is {kind[:40]!r}, not sigmoid or softmax")

    decoded: dict[str, Any] = {}

    def json_of(name: str) -> Any:
        if name not in decoded:
            decoded[name] = attrs.json(name)
        return decoded[name]

    def failing(name: str) -> Any:
        return lambda problem: attrs.fail(name, problem)

    config = check_config(json_of("config"), failing("config"))
    shape, dtype = map_layout()
    map_shape = check_map_shape(shape, dtype, config, kind, lambda p: attrs.fail(_MAP, p))
    check_stored_bytes(where, map_shape, config.map_dtype.itemsize, "a stored map")
    target_hash = attrs.digest("target_hash")
    # A sweep's batch is as long as the set's images left at its place (the last one short).
    swept = _BATCH_POSITION in attrs.names()
    batch_position = attrs.integer(_BATCH_POSITION, 0, config.batch - 1) if swept else None
    batch_hashes = check_digest_list(
        json_of("batch_hashes"), config.batch, failing("batch_hashes"), shorter=swept
    )
    position = config.position if batch_position is None else batch_position
    if position >= len(batch_hashes) or batch_hashes[position] != target_hash:
        raise attrs.fail("batch_hashes", "does not hold the target at its position")
    provenance = _read_provenance(provenance_attrs())
    record = RunRecord(
        key=attrs.digest("key"),
        label=attrs.text("label"),
        config=json_of("config"),
        repeat=attrs.integer("repeat", 0, MAX_REPEATS - 1),
        model_name=attrs.text("model_name"),
        model_hash=attrs.digest("model_hash"),
        target_name=attrs.text("target_name"),
        target_hash=target_hash,
        batch_hashes=batch_hashes,
        batch_names=json_of("batch_names"),
        preprocessing=json_of("preprocessing"),
        output=json_of("output"),
        output_name=attrs.text("output_name"),
        kind=kind,
        raw_output_shape=check_raw_shape(
            json_of("raw_output_shape"),
            len(batch_hashes),
            map_shape,
            kind,
            failing("raw_output_shape"),
        ),
        map_shape=map_shape,
        provenance=provenance,
        batch_position=batch_position,
    )
    check_preprocessing(record.preprocessing, failing("preprocessing"))
    check_output(record.output, failing("output"))
    check_names(record.batch_names, len(batch_hashes), failing("batch_names"))
    checksum = _read_checksum(attrs)
    if checksum is not None and checksum["metadata_sha256"] != _metadata_digest(record):
        raise UnreadableEntry(where, f"run {name}'s attributes do not match their checksum")
    _check_key(record, where)
    # Shown to people: never a control character, and a label made from the configuration.
    shown = replace(
        record,
        label=derived_label(config, record.repeat, provenance, record.model_name),
        model_name=printable(record.model_name),
        target_name=printable(record.target_name),
        output_name=printable(record.output_name),
        batch_names=[printable(name) for name in record.batch_names],
    )
    return shown, None if checksum is None else checksum["map_crc32"]


def _read_checksum(attrs: AttributeReader) -> dict[str, Any] | None:
    if _CHECKSUM not in attrs.names():
        return None  # written before segdiff kept checksums
    value = attrs.json(_CHECKSUM)
    if (
        not isinstance(value, dict)
        or type(value.get("map_crc32")) is not int
        or not is_digest(value.get("metadata_sha256"))
    ):
        raise attrs.fail(_CHECKSUM, "is not a checksum segdiff wrote")
    return value


def _check_key(record: RunRecord, where: str) -> None:
    """The key must be the one its inputs give (or, for a run kept beside this machine's, the
    one made from that key and its machine): a run copied to another key is a forgery."""
    own = expected_key(record)
    original = record.provenance.merged_from_key
    if original is None and record.key == own:
        return
    if original == own and record.key == elsewhere_key(own, record):
        return
    raise UnreadableEntry(
        where,
        f"run {record.key[:16]}'s key does not match its own recorded inputs (model, "
        "images, preprocessing, configuration, repeat): a copied or altered run",
    )


_PROVENANCE_TEXT = ("hostname", "device", "device_description", "tf_version", "timestamp")


def _read_provenance(attrs: AttributeReader) -> Provenance:
    names = attrs.names()
    encoded = attrs.json(_ENCODED) if _ENCODED in names else []
    if not isinstance(encoded, list) or not all(isinstance(name, str) for name in encoded):
        raise attrs.fail(_ENCODED, "is not a list of names")
    provenance: dict[str, Any] = {}
    for name in names:
        if name == _ENCODED:
            continue
        if name in encoded:
            provenance[name] = attrs.json(name)
            continue
        value = attrs.raw(name)
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            provenance[name] = value.item()
        else:
            provenance[name] = attrs.text(name)
    for name in _PROVENANCE_TEXT:
        if name in provenance and not isinstance(provenance[name], str):
            raise attrs.fail(name, "is not text")
    environment = provenance.get("environment", {})
    if not isinstance(environment, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise attrs.fail("environment", "is not a table of variables and their text values")
    if "merged_from_key" in provenance and not is_digest(provenance["merged_from_key"]):
        raise attrs.fail("merged_from_key", "is not a run key")
    return Provenance.from_dict(provenance)
