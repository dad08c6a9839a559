"""Which configurations ``segdiff reproduce`` tries, in which stages (issue 32)."""

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.reproduce import search_stages
from segdiff_gui.core.runtime_defaults import DefaultsInEffect


def test_the_search_starts_where_asked_and_leaves_out_what_a_runtime_refuses():
    """Issue 32: ``reproduce --config runtime=torch`` varies what PyTorch takes (no XLA),
    and the defaults' search varies oneDNN, model.predict's batch, XLA, threads and the
    arithmetic, one at a time and then in pairs."""
    cpu_only = DefaultsInEffect(onednn=False, xla=False)
    first, singles, pairs = search_stages(Preprocessing(), 4, 0, cpu_only, 255.0)
    assert [c.config for c in first] == [RunConfig()]
    assert [c.spec() for c in singles] == [
        "onednn=on", "batch=4", "xla=on", "threads=1", "batch=1",
    ]  # fmt: skip
    assert singles[-1].scaling(Preprocessing()) == {"scale": "1/255"}
    assert len(pairs) == 10 and pairs[0].spec() == "batch=4,onednn=on"
    torch = RunConfig(runtime="torch")
    first, singles, pairs = search_stages(Preprocessing(), 40, 35, DefaultsInEffect(), 255.0, torch)
    assert first[0].name == "runtime=torch, as given"
    assert [c.spec() for c in singles] == [
        "runtime=torch,batch=8,position=3", "runtime=torch,threads=1", "runtime=torch",
    ]  # fmt: skip
    assert not any(c.config.xla for c in (*singles, *pairs))


def test_xla_is_varied_the_other_way_from_model_predicts_choice():
    """Where model.predict compiles with XLA (TensorFlow seeing a GPU; JAX always), the
    search tries it without; where it does not, with."""
    gpu_machine = DefaultsInEffect(onednn=False, xla=True)
    _, singles, _ = search_stages(Preprocessing(), 1, 0, gpu_machine, None)
    assert [c.spec() for c in singles] == ["onednn=on", "xla=off", "threads=1"]
    jax = RunConfig(runtime="jax")
    _, singles, _ = search_stages(Preprocessing(), 1, 0, DefaultsInEffect(xla=True), None, jax)
    assert [c.spec() for c in singles] == ["runtime=jax,xla=off", "runtime=jax,threads=1"]
    set_on = RunConfig(xla=True)
    _, singles, _ = search_stages(Preprocessing(), 1, 0, DefaultsInEffect(), None, set_on)
    assert "xla=off" in [c.spec() for c in singles]
