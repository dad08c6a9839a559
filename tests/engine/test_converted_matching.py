"""Matching a converted model's tensors to the Keras layers they came from, by the names the
converters give them: nested scopes, the ``_1`` tracing adds, fused chains, ONNX's
channels-first layout, and what cannot be matched. (No runtime is imported: the test process
stays free of TensorFlow, which other tests of this worker check.)"""

import numpy as np

from segdiff_gui.engine.tensor_matching import (
    ExpectedLayer,
    RuntimeTensor,
    last_of_each_layer,
    layer_of,
    match_layers,
)

PATHS = {"enc1", "enc1_1", "encoder/conv", "encoder/relu", "mask"}
PREFIXES = PATHS | {"encoder"}


def _tensor(name, shape):
    return RuntimeTensor(name, shape, "float32", lambda: np.zeros(shape, np.float32))


def test_a_tensor_name_gives_the_layer_whose_scope_made_it():
    assert layer_of("unet_1/enc1_1_1/Relu;unet_1/enc1_1_1/BiasAdd", PATHS, PREFIXES) == "enc1_1"
    assert layer_of("unet_1/enc1_1/Relu", PATHS, PREFIXES) == "enc1_1"  # the longest name wins
    assert layer_of("unet_1/encoder_1/relu_1/Relu:0", PATHS, PREFIXES) == "encoder/relu"
    assert layer_of("Transpose__118:0", PATHS, PREFIXES) is None
    assert layer_of("unet_1/up2_1/Repeat/Tile", PATHS, PREFIXES) is None


def test_a_layer_takes_the_last_tensor_of_its_shape_and_onnx_layouts_are_turned_back():
    expected = [
        ExpectedLayer("encoder/conv", "Conv2D", (1, 8, 8, 4)),
        ExpectedLayer("encoder/relu", "Activation", (1, 8, 8, 4)),
        ExpectedLayer("mask", "Conv2D", (1, 8, 8, 1)),
    ]
    tensors = [
        _tensor("m_1/encoder_1/relu_1/Relu:0", (1, 4, 8, 8)),  # channels first (ONNX)
        _tensor("m_1/mask_1/BiasAdd:0", (1, 8, 8, 1)),  # the logits: the sigmoid is the output's
    ]
    finals = [_tensor("mask", (1, 8, 8, 1))]
    matched, unmatched = match_layers(expected, tensors, finals)
    assert unmatched == ["encoder/conv"]  # fused: no tensor of its own
    tensor, layout = matched["encoder/relu"]
    assert layout == (0, 2, 3, 1) and tensor.shape == (1, 4, 8, 8)
    assert matched["mask"][0] is finals[0]
    names = ["m_1/encoder_1/conv_1/Conv:0", "m_1/encoder_1/relu_1/Relu:0", "Transpose:0"]
    assert last_of_each_layer(expected, names) == {names[0], names[1]}


def test_a_shared_layers_calls_and_a_tensor_of_another_shape_stay_unmatched():
    expected = [
        ExpectedLayer("conv", "Conv2D", (1, 8, 8, 4)),
        ExpectedLayer("conv#2", "Conv2D", (1, 8, 8, 4)),
        ExpectedLayer("pool", "MaxPooling2D", (1, 4, 4, 4)),
    ]
    tensors = [
        _tensor("m_1/conv_1/Relu", (1, 8, 8, 4)),
        _tensor("m_1/pool_1/MaxPool", (1, 2, 2, 4)),
    ]
    matched, unmatched = match_layers(expected, tensors)
    assert matched == {} and unmatched == ["conv", "conv#2", "pool"]
