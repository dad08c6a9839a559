"""The precision repair's search on synthetic trials whose answers are known."""

from __future__ import annotations

import numpy as np

from segdiff_gui.core.layer_stats import LayerComparison, compare_layer
from segdiff_gui.core.repair import RepairSearch, Trial, blame_order, repair_code


def _needs(kept: tuple[str, ...]) -> int:
    """Flips of a made-up model: a, c and e each remove some; all three remove all 10."""
    return 10 - 4 * ("a" in kept) - 3 * ("c" in kept) - 3 * ("e" in kept)


def _search(bound: int) -> tuple[RepairSearch, list[int]]:
    search = RepairSearch(["a", "b", "c", "d", "e", "f"], bound)
    search.trials[()] = Trial((), _needs(()))
    rounds = []
    while wanted := search.next_trials():
        rounds.append(len(wanted))
        search.record([Trial(kept, _needs(kept)) for kept in wanted])
    return search, rounds


def test_the_search_finds_the_smallest_prefix_then_prunes_to_what_is_needed():
    search, rounds = _search(bound=0)
    best = search.best()
    assert best is not None and best.kept == ("a", "c", "e") and best.flips == 0
    # Every prefix at once; every layer alone (one of the five is a prefix, tried already);
    # the removable ones together (one of the two sets tried already); every layer alone.
    assert rounds == [6, 4, 1, 3] and search.phase == "done"


def test_a_bound_keeps_fewer_layers_and_an_impossible_one_says_so():
    search, _ = _search(bound=3)
    assert search.best() is not None and search.best().kept == ("a", "c")
    impossible = RepairSearch(["a", "b"], bound=0)
    impossible.trials[()] = Trial((), 5)
    while wanted := impossible.next_trials():
        impossible.record([Trial(kept, 1) for kept in wanted])
    assert impossible.phase == "failed" and impossible.best() is None


def test_a_long_order_is_searched_in_rounds_of_spread_prefixes():
    order = [f"layer{i:03d}" for i in range(200)]
    needed = set(order[:57])
    search = RepairSearch(order, 0, round_trials=8)
    tried_sizes = []
    while wanted := search.next_trials():
        if search.phase == "prefix":
            tried_sizes.append(sorted(len(kept) for kept in wanted))
        search.record([Trial(k, 0 if needed <= set(k) else 1) for k in wanted])
    assert len(tried_sizes) <= 4 and all(len(sizes) <= 8 for sizes in tried_sizes)
    assert set(search.best().kept) == needed


def test_blame_puts_the_layer_where_the_difference_is_born_first():
    base = np.linspace(1, 2, 32, dtype=np.float32)

    def moved(relative: float) -> np.ndarray:
        return (base * np.float32(1 + relative)).astype(np.float32)

    layers = [
        compare_layer("input_norm", base, base),
        compare_layer("conv", base, moved(1e-5)),
        compare_layer("pool", base, moved(1e-5)),
        compare_layer("dense", base, moved(1e-3)),  # ×100
        compare_layer("dense:1", base, moved(1e-3)),  # its second output: the same layer
    ]
    assert blame_order(LayerComparison(tuple(layers))) == ["conv", "dense", "pool", "input_norm"]


def test_the_code_is_python_that_names_the_layers_and_the_policy():
    code = repair_code("unet.keras", "mixed_bfloat16", ["encoder/conv", "mask"])
    compile(code, "repair.py", "exec")
    assert "'encoder/conv'" in code and "POLICY = 'mixed_bfloat16'" in code
    assert "load_model('unet.keras'" in code
