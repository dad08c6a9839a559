"""What the precision repair refuses before any child starts, each in one line."""

import pytest

from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.runner.layers import LayerProbeSession
from segdiff_gui.runner.repair import RepairSession
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage.cache import ResultCache


@pytest.mark.parametrize(
    "config, said",
    [
        (RunConfig(), "computes in float32 already"),
        (RunConfig(precision="float64"), "cpu b1 fp64 computes in float64 already"),
        (RunConfig(runtime="litert-int8"), r"runs a converted model \(LiteRT full int8\)"),
    ],
)
def test_a_target_without_a_reduced_keras_precision_is_refused(demo, tmp_path, config, said):
    model, images = demo
    request = MatrixRequest(model, tuple(images), ResultCache(tmp_path / "cache"), repeats=1)
    with pytest.raises(InputError, match=said) as refused:
        RepairSession(request, config)
    assert "\n" not in str(refused.value)


def test_the_layer_probe_refuses_the_exact_reference(demo, tmp_path):
    """It stores and compares float32 layers: the exact reference's would be rounded."""
    model, images = demo
    request = MatrixRequest(model, tuple(images), ResultCache(tmp_path / "cache"), repeats=1)
    with pytest.raises(InputError, match="cpu b1 fp64 is the exact reference") as refused:
        LayerProbeSession(request, RunConfig(), RunConfig(precision="float64"))
    assert "\n" not in str(refused.value)
