"""Which configurations ``segdiff reproduce`` tries, in which stages (issues 32 and 51)."""

import numpy as np

from segdiff_gui.core.config import Preprocessing, RunConfig
from segdiff_gui.core.reproduce import Reproduction, Start, Trial, search_stages
from segdiff_gui.core.runtime_defaults import DefaultsInEffect


def _stages(image_count, target, in_effect, dtype_max, base=None):
    """One runtime's search: its start, its single knobs and its pairs."""
    start = Start(base or RunConfig(), in_effect)
    plan = search_stages(Preprocessing(), image_count, target, [start], dtype_max)
    (runtime,) = plan.runtimes
    return list(plan.first().candidates), plan.singles[runtime], plan.pairs[runtime]


def test_the_search_starts_where_asked_and_leaves_out_what_a_runtime_refuses():
    """``reproduce --config runtime=torch`` varies what PyTorch takes (no XLA),
    and the defaults' search varies oneDNN, model.predict's batch, XLA, threads and the
    arithmetic, one at a time and then in pairs."""
    cpu_only = DefaultsInEffect(onednn=False, xla=False)
    first, singles, pairs = _stages(4, 0, cpu_only, 255.0)
    assert [c.config for c in first] == [RunConfig()]
    assert [c.spec() for c in singles] == [
        "onednn=on", "batch=4", "xla=on", "threads=1", "batch=1",
    ]  # fmt: skip
    assert singles[-1].scaling(Preprocessing()) == {"scale": "1/255"}
    assert len(pairs) == 10 and pairs[0].spec() == "batch=4,onednn=on"
    torch = RunConfig(runtime="torch")
    first, singles, pairs = _stages(40, 35, DefaultsInEffect(), 255.0, torch)
    assert first[0].name == "runtime=torch, as given"
    assert [c.spec() for c in singles] == [
        "runtime=torch,batch=8,position=3", "runtime=torch,threads=1", "runtime=torch",
    ]  # fmt: skip
    assert not any(c.config.xla for c in (*singles, *pairs))


def test_xla_is_varied_the_other_way_from_model_predicts_choice():
    """Where model.predict compiles with XLA (TensorFlow seeing a GPU; JAX always), the
    search tries it without; where it does not, with."""
    gpu_machine = DefaultsInEffect(onednn=False, xla=True)
    _, singles, _ = _stages(1, 0, gpu_machine, None)
    assert [c.spec() for c in singles] == ["onednn=on", "xla=off", "threads=1"]
    jax = RunConfig(runtime="jax")
    _, singles, _ = _stages(1, 0, DefaultsInEffect(xla=True), None, jax)
    assert [c.spec() for c in singles] == ["runtime=jax,xla=off", "runtime=jax,threads=1"]
    set_on = RunConfig(xla=True)
    _, singles, _ = _stages(1, 0, DefaultsInEffect(), None, set_on)
    assert "xla=off" in [c.spec() for c in singles]


_TF_KERAS = RunConfig(runtime="tf_keras")


def _two_runtimes():
    """A .h5's search on a CPU where oneDNN is on: from Keras 3's defaults and Keras 2's."""
    in_effect = DefaultsInEffect(onednn=True, xla=False)
    starts = [Start(RunConfig(), in_effect), Start(_TF_KERAS, in_effect)]
    return search_stages(Preprocessing(), 4, 0, starts, 255.0)


def _trial(candidate, differing, max_ulp=3):
    """A trial of ``candidate`` whose map differs from the user's in ``differing`` pixels."""
    user = np.zeros((4, 4), np.float32)
    theirs = user.copy()
    theirs.ravel()[:differing] = np.float32(1e-45) * max_ulp
    return Trial.of(candidate, "key", candidate.config.label(), user, theirs)


def test_every_runtime_the_file_runs_under_is_tried_before_any_knob():
    """A .h5 is tried at the defaults under Keras 3 and Keras 2 together, each
    runtime's knobs after, the runtime whose defaults came nearest the user's map first; a
    runtime whose child could not load the model is searched no further."""
    plan = _two_runtimes()
    first = plan.first()
    assert first.words == "the defaults under TensorFlow and tf_keras"
    assert [c.config for c in first.candidates] == [RunConfig(), _TF_KERAS]
    assert first.candidates[1].name == "the runtime: tf_keras, not TensorFlow"
    keras3, keras2 = first.candidates
    later = plan.later([_trial(keras3, 5), _trial(keras2, 2)])
    assert [stage.words for stage in later] == [
        "one knob at a time under tf_keras", "one knob at a time under TensorFlow",
        "pairs of knobs under tf_keras", "pairs of knobs under TensorFlow",
    ]  # fmt: skip
    batch = next(c for c in later[0].candidates if c.config.batch == 4)
    assert batch.config.runtime == "tf_keras" and batch.name.startswith("the runtime: tf_keras")
    # A tie keeps the user's runtime first; a runtime that could not load is left out.
    tied = plan.later([_trial(keras3, 2), _trial(keras2, 2)])
    assert tied[0].runtime == "tensorflow"
    assert {stage.runtime for stage in plan.later(skip={"tensorflow"})} == {"tf_keras"}
    assert plan.varied()[0] == "the runtime (TensorFlow and tf_keras)"
    assert plan.varied().count("batch 4 (model.predict's batch of these images)") == 1


def test_the_answer_names_the_runtime_when_the_runtime_is_the_difference():
    """Found under tf_keras, the sentence says the runtime; not found, and nearest under a
    runtime nearer than every other's, it names that runtime and never says to check the
    preprocessing; nearest under both alike, it does."""
    keras3, keras2 = _two_runtimes().first().candidates
    found = Reproduction((_trial(keras3, 5), _trial(keras2, 0)), ())
    assert found.sentence() == (
        "your map is tf_keras cpu b1 bit for bit (the runtime: tf_keras, not TensorFlow)"
    )
    nearer = Reproduction((_trial(keras3, 5), _trial(keras2, 2)), ()).sentence()
    assert nearer.startswith("no configuration reproduces it: the nearest is tf_keras cpu b1")
    assert "your pipeline ran tf_keras" in nearer and "preprocessing" not in nearer
    alike = Reproduction((_trial(keras3, 2), _trial(keras2, 2)), ()).sentence()
    assert alike.endswith("check preprocessing")
    alone = Reproduction((_trial(keras3, 2),), ()).sentence()
    assert alone.endswith("check preprocessing")
