from segdiff_gui.core.hashing import hash_path, run_key

BASE = dict(
    model_hash="m",
    target_hash="t",
    batch_hashes=["t"],
    preprocessing={"scale": None},
    output={"output": None},
    config={"batch": 1},
    repeat=0,
)


def test_key_is_stable_and_depends_on_every_ingredient():
    assert run_key(**BASE) == run_key(**dict(BASE))
    changes = dict(
        model_hash="m2",
        target_hash="t2",
        batch_hashes=["t", "u"],
        preprocessing={"scale": 1.0},
        output={"output": "a"},
        config={"batch": 2},
        repeat=1,
        environment={"XLA_FLAGS": "--xla_gpu_autotune_level=0"},
    )
    keys = {run_key(**{**BASE, name: value}) for name, value in changes.items()}
    assert len(keys) == len(changes) and run_key(**BASE) not in keys


def test_batch_order_is_part_of_the_key():
    a = run_key(**{**BASE, "batch_hashes": ["t", "u"]})
    b = run_key(**{**BASE, "batch_hashes": ["u", "t"]})
    assert a != b


def test_hash_path_covers_directory_contents(tmp_path):
    folder = tmp_path / "saved"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"graph")
    (folder / "variables" / "v").write_bytes(b"1")
    before = hash_path(folder)
    (folder / "variables" / "v").write_bytes(b"2")
    assert hash_path(folder) != before
    (tmp_path / "file").write_bytes(b"abc")
    assert (
        hash_path(tmp_path / "file")
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
