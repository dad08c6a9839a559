"""Which configurations ``segdiff reproduce`` tries, in which stages (issue 32)."""

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.reproduce import search_stages


def test_the_search_starts_where_asked_and_leaves_out_what_a_runtime_refuses():
    """Issue 32: ``reproduce --config runtime=torch`` varies what PyTorch takes (no XLA),
    and the defaults' search varies oneDNN, model.predict's batch, XLA, threads and the
    arithmetic, one at a time and then in pairs."""
    first, singles, pairs = search_stages(Preprocessing(), 4, 0, False, 255.0)
    assert [c.config for c in first] == [RunConfig()]
    assert [c.spec() for c in singles] == [
        "onednn=on", "batch=4", "xla=on", "threads=1", "batch=1",
    ]  # fmt: skip
    assert singles[-1].scaling(Preprocessing()) == {"scale": "1/255"}
    assert len(pairs) == 10 and pairs[0].spec() == "batch=4,onednn=on"
    torch = RunConfig(runtime="torch")
    first, singles, pairs = search_stages(Preprocessing(), 40, 35, None, 255.0, torch)
    assert first[0].name == "runtime=torch, as given"
    assert [c.spec() for c in singles] == [
        "runtime=torch,batch=8,position=3", "runtime=torch,threads=1", "runtime=torch",
    ]  # fmt: skip
    assert not any(c.config.xla for c in (*singles, *pairs))
