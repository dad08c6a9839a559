def test_shards_split_the_set_into_disjoint_near_equal_slices() -> None:
    from segdiff_gui.runner.plan import shard_slice

    for count in (0, 1, 5, 16, 17):
        for total in (1, 2, 3, 8, 20):
            slices = [list(shard_slice(count, (k, total))) for k in range(1, total + 1)]
            flat = [i for part in slices for i in part]
            assert flat == list(range(count))  # in order, each image exactly once
            sizes = [len(part) for part in slices]
            assert max(sizes) - min(sizes) <= 1


def test_a_frozen_app_starts_its_engine_through_itself(monkeypatch) -> None:
    import sys

    from segdiff_gui.runner.child import ENGINE_FLAG, engine_command

    assert engine_command("run") == [sys.executable, "-m", "segdiff_gui.engine", "run"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/segdiff/segdiff-gui")
    assert engine_command("probe") == ["/opt/segdiff/segdiff-gui", ENGINE_FLAG, "probe"]
