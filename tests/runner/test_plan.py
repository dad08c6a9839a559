def test_shards_split_the_set_into_disjoint_near_equal_slices() -> None:
    from segdiff_gui.runner.plan import shard_slice

    for count in (0, 1, 5, 16, 17):
        for total in (1, 2, 3, 8, 20):
            slices = [list(shard_slice(count, (k, total))) for k in range(1, total + 1)]
            flat = [i for part in slices for i in part]
            assert flat == list(range(count))  # in order, each image exactly once
            sizes = [len(part) for part in slices]
            assert max(sizes) - min(sizes) <= 1
