"""A stored run's provenance as a typed value: what readers see of it, that it never changes
under them, and that every attribute (a newer writer's too) crosses bundles bit for bit."""

from dataclasses import replace

import h5py
import numpy as np

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.runtime_defaults import DefaultsInEffect
from segdiff_gui.storage import ResultCache, merge_bundle, write_bundle
from segdiff_gui.storage.provenance import Provenance, StatedImport
from segdiff_gui.storage.records import configuration_label, expected_key
from tests.factories import IMAGE_HASH, make_record, sealed

# What a newer segdiff might record: kinds of values this one has no property for.
NEWER = {
    "future_table": {"nested": [1, 2.5, "x", None, True], "deep": {"k": [[]]}},
    "future_big": 2**64,  # beyond int64: kept as JSON text, read back as the same int
    "future_negative": -(2**63),
    "future_float": 0.1,
    "future_flag": False,
    "future_text": "naïve ✓",
    "future_list": ["a", 1],
}


def _stored_attributes(path) -> dict[str, object]:
    """The provenance group's attributes as h5py reads them: value, dtype and all."""
    with h5py.File(path, "r") as handle:
        attrs = handle["provenance"].attrs
        return {
            name: (attrs[name], getattr(attrs[name], "dtype", type(attrs[name]))) for name in attrs
        }


def _same(first: dict[str, object], second: dict[str, object]) -> bool:
    return first.keys() == second.keys() and all(
        repr(first[name]) == repr(second[name]) for name in first
    )


def test_a_bundle_keeps_every_provenance_attribute_bit_for_bit(tmp_path):
    """A run with attributes this version does not know, bundled and merged into another
    cache (added, and kept beside a run of this machine), keeps every one as it was stored."""
    server, laptop = ResultCache(tmp_path / "server"), ResultCache(tmp_path / "laptop")
    values = np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)
    base = make_record("m", values)
    theirs = replace(base, provenance=base.provenance.updated({**NEWER, "hostname": "gpu"}))
    other = sealed(make_record("m", values, "cpu b64 r0"), provenance=theirs.provenance)
    for record in (theirs, other):
        server.write_run(record)
    server.write_image(IMAGE_HASH, "t.png", np.zeros((4, 5), np.uint8))
    laptop.write_run(make_record("m", values + np.float32(1e-7)))  # this machine's own b1 run
    write_bundle(server, [theirs.key, other.key], tmp_path / "b.h5")
    result = merge_bundle(tmp_path / "b.h5", laptop)
    (elsewhere,) = result.from_other_machines
    assert result.added == [elsewhere, other.key]

    marks = {"merged_from_bundle", "merged_at", "merged_from_key"}
    for kept, original in ((elsewhere, theirs.key), (other.key, other.key)):
        stored = _stored_attributes(laptop.run_path(kept))
        source = _stored_attributes(server.run_path(original))
        assert _same({k: v for k, v in stored.items() if k not in marks}, source)
        provenance = laptop.read_run(kept).provenance.to_dict()
        assert {name: provenance[name] for name in NEWER} == NEWER
    assert laptop.read_run(elsewhere).provenance.merged_from_key == theirs.key


def test_readers_see_typed_values_and_nothing_that_is_not_one():
    """What a reader asks of a provenance is typed; a value of the wrong type (a damaged or
    foreign file that still checks) reads as absent, never as something else."""
    good = Provenance.from_dict(
        {
            "device": "gpu:0",
            "hostname": "server",
            "runtime": "jax",
            "runtime_version": "0.4.30",
            "tf_version": "2.21.0",
            "onednn_enabled": True,
            "intra_op_threads": 0,
            "xla": True,
            "calibration_hashes": ["a" * 64, "b" * 64],
            "defaults_in_effect": {"xla": True},
            "environment": {"XLA_FLAGS": "--x"},
            "imported": {"map_sha256": "c" * 64, "label": "colab", "notes": {"gpu": "T4"}},
            "merged_from_bundle": "b.h5",
            "wall_time_s": 1.5,
        }
    )
    assert (good.device, good.hostname, good.runtime, good.version) == (
        "gpu:0",
        "server",
        "jax",
        "0.4.30",  # the runtime's own version is the one shown
    )
    assert good.machine == '["server",null,"2.21.0"]'  # TensorFlow's first, as keys hold it
    assert good.onednn_enabled is True and good.intra_op_threads == 0 and good.xla is True
    assert good.calibration_tag.startswith("cal2#") and good.wall_time_s == 1.5
    assert good.defaults_in_effect == DefaultsInEffect(xla=True)
    assert good.environment == {"XLA_FLAGS": "--x"}
    assert good.imported == StatedImport("c" * 64, "colab", "?", "", {"gpu": "T4"})
    assert good.merged and good.merged_from_key is None and good.merged_from_bundle == "b.h5"
    assert repr(good) == "Provenance(device='gpu:0', runtime='jax 0.4.30', host='server', " + (
        "imported='colab')"
    )

    wrong = Provenance.from_dict(
        {
            "onednn_enabled": 1,
            "intra_op_threads": "4",
            "xla": "yes",
            "calibration_hashes": "a" * 64,
            "defaults_in_effect": [True],
            "imported": "colab",
            "wall_time_s": True,
        }
    )
    assert (wrong.onednn_enabled, wrong.intra_op_threads, wrong.xla) == (None, None, None)
    assert wrong.calibration_hashes is None and wrong.calibration_tag == ""
    assert wrong.defaults_in_effect == DefaultsInEffect() and wrong.imported is None
    assert wrong.wall_time_s is None and not wrong.merged
    assert (wrong.runtime, wrong.version, wrong.device) == ("tensorflow", "", None)


def test_what_a_run_computed_with_is_said_a_line_each():
    computed = Provenance.from_dict(
        {
            "device": "cpu:0",
            "runtime": "tensorflow",
            "tf_version": "2.21.0",
            "onednn_enabled": False,
            "intra_op_threads": 1,
            "xla": False,
            "op_determinism": True,
            "hostname": "laptop",
        }
    )
    assert computed.in_effect_lines(RunConfig()) == [
        "on cpu:0, tensorflow 2.21.0",
        "oneDNN off: TensorFlow's default on this CPU",
        "intra-op threads: 1",
        "XLA off (model.predict's choice)",
        "op determinism on",
        "host laptop",
    ]
    assert computed.onednn_in_effect(RunConfig(onednn=False)) == "off: set (onednn=off)"
    stated = Provenance.from_dict({"imported": {"file": "m.npy", "notes": {"device": "T4"}}})
    assert stated.in_effect_lines(RunConfig()) == [
        "imported from m.npy (stated, not measured)",
        "notes: device=T4",
    ]
    assert Provenance().in_effect_lines(RunConfig()) == ["on ?, tensorflow"]
    emulated = computed.updated({"emulation": "TF32 emulated on this CPU (…): 11 convolutions"})
    assert emulated.in_effect_lines(RunConfig(emulate="tf32"))[-2:] == [
        "TF32 emulated on this CPU (…): 11 convolutions",
        "host laptop",
    ]
    assert computed.emulation is None


def test_a_provenance_never_changes_under_its_readers(tmp_path):
    """What a reader is given (a dict for JSON, the environment, an import's notes) is its
    own: changing it changes neither the run nor the key its inputs give."""
    cache = ResultCache(tmp_path / "cache")
    record = make_record("m", np.zeros((4, 5), np.float32))
    cache.write_run(record)
    stored = cache.read_run(record.key, with_map=False)
    key = expected_key(stored)
    stored.provenance.to_dict()["environment"]["TF_ENABLE_ONEDNN_OPTS"] = "0"
    stored.provenance.environment["XLA_FLAGS"] = "--changed"
    assert stored.provenance.environment == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert expected_key(stored) == key == stored.key
    source = {"imported": {"notes": {"device": "T4"}}}
    provenance = Provenance.from_dict(source)
    source["imported"]["notes"]["device"] = "A100"
    assert provenance.imported is not None and provenance.imported.notes == {"device": "T4"}
    provenance.imported.notes["device"] = "A100"
    assert provenance.to_dict() == {"imported": {"notes": {"device": "T4"}}}


def test_an_openvino_run_names_the_precision_its_compiled_model_reported():
    """OpenVINO's CPU plugin infers in bf16 on some CPUs and f32 on others when
    nobody asks; the run says which in its label and its lines, and an asked one says so."""
    computed = Provenance.from_dict(
        {"device": "cpu:0", "runtime": "openvino", "runtime_version": "2026.4.1",
         "inference_precision": "bf16", "defaults_in_effect": {"inference_precision": "bf16"}}
    )  # fmt: skip
    default = RunConfig(runtime="openvino")
    asked = RunConfig(runtime="openvino", inference_precision="bf16")
    assert computed.inference_precision == "bf16"
    assert computed.defaults_in_effect == DefaultsInEffect(inference_precision="bf16")
    assert computed.in_effect_lines(default)[1] == (
        "inference precision bf16: OpenVINO's default on this CPU"
    )
    assert computed.in_effect_lines(asked)[1] == (
        "inference precision bf16: set (inference_precision=bf16)"
    )
    assert configuration_label(default, computed) == "openvino cpu b1 bf16"
    assert configuration_label(asked, computed) == "openvino cpu b1 infer-bf16"
    assert configuration_label(default, Provenance()) == "openvino cpu b1"
    # A stored value that is no type name is not shown (a file is untrusted).
    forged = computed.updated({"inference_precision": "bf16 \x1b[31m"})
    assert forged.inference_precision is None
    assert configuration_label(default, forged) == "openvino cpu b1"
